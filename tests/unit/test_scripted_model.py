"""The scripted model endpoint: scripts, shell-tool adaptation, and each API's wire format
as real clients parse it (the OpenAI SDK for Chat Completions and Responses; the SSE
event grammar for Anthropic and Gemini, whose CLIs run against it in the slow tier)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
import pytest

from posttrainbench.host.scripted_model.reply import ToolSpec, shell_arguments
from posttrainbench.host.scripted_model.script import (
    ScriptError,
    default_script,
    load_script,
    parse_script,
)
from posttrainbench.host.scripted_model.server import ScriptedModelServer

KEY = "sk-test-canary-0123456789"
SCRIPT = parse_script(
    """
turns:
  - text: Looking first.
    shell: ls -la /app
  - tool: Read
    arguments: {file_path: /app/timer.sh}
  - text: All done.
closing: Nothing left.
""",
    "test",
)
BASH = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
    "required": ["command", "description"],
}


def _sse(text: str) -> list[tuple[str | None, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        name = None
        data = []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


@pytest.fixture
def server(tmp_path: Path):
    with ScriptedModelServer(SCRIPT, expected_key=KEY, log_path=tmp_path / "log.jsonl") as running:
        yield running


def test_a_script_is_a_list_of_turns_or_a_mapping_with_closing() -> None:
    assert len(parse_script("- text: hi\n", "s").turns) == 1
    assert SCRIPT.closing == "Nothing left."
    assert SCRIPT.turns[0].calls_tool and not SCRIPT.turns[2].calls_tool
    assert default_script("codex").turns[-1].text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("turns: [{shell: ls, tool: Read}]", "turns.0: Value error, a turn calls either"),
        ("turns: [{}]", "turns.0: Value error, a turn needs"),
        ("turns: []", "turns: List should have at least 1 item"),
        ("turns: [{text: a, arguments: {x: 1}}]", "arguments` belong to a `tool` turn"),
        ("turns: [", "not YAML"),
    ],
)
def test_a_bad_script_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ScriptError, match="s: .*" if message == "not YAML" else None) as info:
        parse_script(text, "s")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_script_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read script"):
        load_script(tmp_path / "nope.yaml")


def test_a_shell_turn_takes_the_shape_of_each_clis_shell_tool() -> None:
    claude = ToolSpec("Bash", BASH)
    assert shell_arguments(claude, "ls") == {"command": "ls", "description": "scripted step"}
    codex_shell = ToolSpec(
        "shell", {"properties": {"command": {"type": "array", "items": {"type": "string"}}}}
    )
    assert shell_arguments(codex_shell, "ls") == {"command": ["bash", "-lc", "ls"]}
    codex_exec = ToolSpec(
        "exec_command", {"properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
    )
    assert shell_arguments(codex_exec, "ls") == {"cmd": "ls"}


def test_chat_completions_stream_parses_in_the_openai_sdk(server: ScriptedModelServer) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]
    messages = [{"role": "user", "content": "go"}]
    stream = client.chat.completions.create(model="m", messages=messages, tools=tools, stream=True)
    text, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for call in delta.tool_calls or []:
            calls.setdefault(call.index, [call.function.name, ""])[1] += (
                call.function.arguments or ""
            )
        finish = chunk.choices[0].finish_reason or finish
    assert text == "Looking first."
    assert finish == "tool_calls"
    assert calls[0][0] == "bash"
    assert json.loads(calls[0][1]) == {"command": "ls -la /app", "description": "scripted step"}
    # Not streamed: the second turn, a named tool with its arguments as given.
    whole = client.chat.completions.create(model="m", messages=messages, tools=tools)
    call = whole.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "Read",
        {"file_path": "/app/timer.sh"},
    )


def test_responses_stream_parses_in_the_openai_sdk(server: ScriptedModelServer) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    tools = [
        {
            "type": "function",
            "name": "shell",
            "parameters": {"properties": {"command": {"type": "array"}}},
        }
    ]
    with client.responses.stream(model="m", input="go", tools=tools) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Looking first."
    call = next(item for item in final.output if item.type == "function_call")
    assert call.name == "shell" and json.loads(call.arguments) == {
        "command": ["bash", "-lc", "ls -la /app"]
    }
    assert final.usage is not None and final.usage.output_tokens > 0


def test_anthropic_stream_follows_the_messages_event_grammar(server: ScriptedModelServer) -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "Bash", "input_schema": BASH}],
    }
    response = httpx.post(server.url + "/v1/messages", json=body, headers={"x-api-key": KEY})
    events = _sse(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    for name, data in events:
        assert json.loads(data)["type"] == name  # the event line and its payload agree
    blocks: dict[int, dict] = {}
    for name, data in events:
        payload = json.loads(data)
        if name == "content_block_start":
            blocks[payload["index"]] = payload["content_block"] | {"_json": ""}
        elif name == "content_block_delta":
            delta = payload["delta"]
            block = blocks[payload["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                block["_json"] += delta["partial_json"]
    assert blocks[0]["text"] == "Looking first."
    assert (
        blocks[1]["name"] == "Bash" and json.loads(blocks[1]["_json"])["command"] == "ls -la /app"
    )
    assert json.loads(events[-2][1])["delta"]["stop_reason"] == "tool_use"


def test_gemini_stream_and_side_checks(server: ScriptedModelServer) -> None:
    url = server.url + "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    side = {
        "contents": [{"role": "user", "parts": [{"text": "next?"}]}],
        "generationConfig": {"responseMimeType": "application/json"},
    }
    answer = _sse(httpx.post(url, json=side, headers={"x-goog-api-key": KEY}).text)
    text = json.loads(answer[0][1])["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text)["next_speaker"] == "user"
    declarations = [
        {
            "name": "run_shell_command",
            "parametersJsonSchema": {"properties": {"command": {"type": "STRING"}}},
        }
    ]
    body = {"contents": side["contents"], "tools": [{"functionDeclarations": declarations}]}
    events = _sse(httpx.post(url, json=body, headers={"x-goog-api-key": KEY}).text)
    parts = json.loads(events[0][1])["candidates"][0]["content"]["parts"]
    assert parts[1]["functionCall"]["args"] == {"command": "ls -la /app"}
    assert server.conversation.turns_used == 1  # the JSON side check took no turn


def test_requests_without_tools_take_no_turn_and_the_key_is_never_logged(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    title = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "title?"}]
    )
    assert title.choices[0].message.content == "OK."
    assert server.conversation.turns_used == 0
    wrong = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-other", max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]
    for _ in range(4):  # three turns, then the closing text
        last = wrong.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], tools=tools
        )
    assert last.choices[0].message.content == "Nothing left."
    assert [r.key_ok for r in server.requests] == [True, False, False, False, False]
    log = (tmp_path / "log.jsonl").read_text()
    assert KEY not in log and len(log.splitlines()) == 5


def test_a_shell_turn_without_a_shell_tool_is_refused_with_the_tools_offered(
    server: ScriptedModelServer,
) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "Read", "parameters": {}}}]
    with pytest.raises(
        openai.BadRequestError, match=r"no shell tool among the tools offered \(Read\)"
    ):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "go"}], tools=tools
        )
    assert server.requests[-1].error
