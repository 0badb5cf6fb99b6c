"""The scripted model's HTTP server: routes each API's paths to its wire format.

One server answers all four APIs at once (Anthropic under ``/v1/messages``, OpenAI under
``/v1/chat/completions`` and ``/v1/responses``, Gemini under ``/v1beta/models/...``), so
an agent CLI is pointed at it with its usual base-URL setting. Every request is recorded
(``requests``, and one JSON line each in ``log_path``) with whether it carried the API key
the server expects; the key itself is never recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from posttrainbench.host.scripted_model import (
    wire_anthropic,
    wire_gemini,
    wire_openai_chat,
    wire_openai_responses,
)
from posttrainbench.host.scripted_model.reply import Conversation, Reply, ToolSpec, UnanswerableTurn
from posttrainbench.host.scripted_model.script import Script
from posttrainbench.host.scripted_model.sse import Event

MAX_BODY_BYTES = 64 * 2**20
KEY_HEADERS = ("x-api-key", "x-goog-api-key", "authorization")


@dataclass(frozen=True)
class Wire:
    """One API's wire format: its tools, its stream and its whole answer."""

    id_prefix: str
    tools: Callable[[dict[str, Any]], list[ToolSpec]]
    events: Callable[[Reply, str, str], list[Event]]
    whole: Callable[[Reply, str, str], dict[str, Any]]


WIRES: dict[str, Wire] = {
    "anthropic": Wire("msg", wire_anthropic.tools, wire_anthropic.events, wire_anthropic.message),
    "openai-chat": Wire(
        "chatcmpl", wire_openai_chat.tools, wire_openai_chat.events, wire_openai_chat.completion
    ),
    "openai-responses": Wire(
        "resp",
        wire_openai_responses.tools,
        wire_openai_responses.events,
        wire_openai_responses.response,
    ),
    "gemini": Wire("gem", wire_gemini.tools, wire_gemini.events, wire_gemini.content),
}


class RecordedRequest(BaseModel):
    """One request the server received (the body as JSON; no header values)."""

    api: str = Field(description="anthropic, openai-chat, openai-responses, gemini or other")
    method: str
    path: str
    at: float
    key_ok: bool | None = Field(description="carried the expected key; None: no key expected")
    tools: list[str] = Field(default_factory=list)
    turn: int | None = Field(default=None, description="the script turn it took, from 1")
    calls: list[str] = Field(default_factory=list, description="tools the answer called")
    error: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)


def _api_of(path: str) -> str:
    if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if "/models/" in path and ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    return "other"


def _prompt_chars(body: dict[str, Any]) -> int:
    return len(json.dumps(body.get("messages") or body.get("input") or body.get("contents") or ""))


class ScriptedModelServer:
    """A running scripted model: ``start()``, point agents at ``url``, ``stop()``."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        expected_key: str | None = None,
        log_path: Path | None = None,
        model: str = "scripted-model",
    ) -> None:
        self.conversation = Conversation(script)
        self.expected_key = expected_key
        self.log_path = log_path
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1_000_000))
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT``, the base URL without an API path."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ScriptedModelServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_id(self, prefix: str) -> str:
        """A fresh response id."""
        with self._lock:
            return f"{prefix}_ptb_{next(self._ids):06d}"

    def record(self, entry: RecordedRequest) -> None:
        """Keep ``entry`` and append it to the log file."""
        with self._lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as handle:
                    handle.write(entry.model_dump_json() + "\n")

    def key_ok(self, headers: dict[str, str], query: str) -> bool | None:
        """Whether the request carried the expected key (header or Gemini's ``key=``)."""
        if self.expected_key is None:
            return None
        values = [headers.get(name, "") for name in KEY_HEADERS]
        values.append(query)
        return any(self.expected_key in value for value in values)

    def answer(self, api: str, body: dict[str, Any]) -> tuple[Reply, list[str], int | None]:
        """The reply to one request, the tools it offered, and the turn it took."""
        tool_specs = WIRES[api].tools(body)
        if api == "gemini" and wire_gemini.wants_json(body):
            return Reply(wire_gemini.JSON_SIDE_ANSWER, output_tokens=1), [], None
        reply, taken = self.conversation.answer(tool_specs, _prompt_chars(body))
        return reply, [t.name for t in tool_specs], taken


def _render(server: ScriptedModelServer, api: str, reply: Reply, stream: bool) -> Any:
    wire = WIRES[api]
    render = wire.events if stream else wire.whole
    return render(reply, server.model, server.next_id(wire.id_prefix))


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # every request is recorded instead

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, events: list[Event]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            server.record(
                RecordedRequest(
                    api=_api_of(parts.path),
                    method="GET",
                    path=parts.path,
                    at=time.time(),
                    key_ok=None,
                )
            )
            if parts.path.endswith("/models"):
                entry = {"id": server.model, "object": "model", "created": 0, "owned_by": "ptb"}
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [entry],
                        "models": [{"name": f"models/{server.model}"}],
                    },
                )
            else:
                self._send_json(
                    404, {"error": {"type": "not_found", "message": f"no route {parts.path}"}}
                )

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            api = _api_of(parts.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            length = int(headers.get("content-length") or 0)
            raw = self.rfile.read(min(length, MAX_BODY_BYTES)) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            entry = RecordedRequest(
                api=api,
                method="POST",
                path=parts.path,
                at=time.time(),
                key_ok=server.key_ok(headers, parts.query),
                body=body if isinstance(body, dict) else {},
            )
            if api == "other":
                server.record(entry.model_copy(update={"error": "unknown route"}))
                self._send_json(
                    404, {"error": {"type": "not_found", "message": f"no route {parts.path}"}}
                )
                return
            if parts.path.endswith("/count_tokens") or parts.path.endswith(":countTokens"):
                server.record(entry)
                tokens = max(1, _prompt_chars(entry.body) // 4)
                self._send_json(200, {"input_tokens": tokens, "totalTokens": tokens})
                return
            stream = bool(entry.body.get("stream")) or ":streamGenerateContent" in parts.path
            try:
                reply, offered, turn = server.answer(api, entry.body)
            except UnanswerableTurn as exc:
                server.record(entry.model_copy(update={"error": str(exc)}))
                self._send_json(
                    400, {"error": {"type": "invalid_request_error", "message": str(exc)}}
                )
                return
            server.record(
                entry.model_copy(
                    update={"tools": offered, "turn": turn, "calls": [c.name for c in reply.calls]}
                )
            )
            rendered = _render(server, api, reply, stream)
            if stream:
                self._send_stream(rendered)
            else:
                self._send_json(200, rendered)

    return Handler
