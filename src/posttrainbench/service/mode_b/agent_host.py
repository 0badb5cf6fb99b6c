"""The candidate side of Mode B: builds the candidate's agent class and runs it, unprivileged.

``python -m posttrainbench.service.mode_b.agent_host --fd N --parent PID`` is started by
:class:`~posttrainbench.service.mode_b.proxy_agent.CandidateProxyAgent` as the candidate user,
with the candidate's code first on ``PYTHONPATH``. Nothing here is trusted: the proxy
validates every message, so a candidate that replaces or patches this module only
changes what it asks for, never what the proxy does or what the verifier writes.

The agent gets a :class:`RemoteEnvironment`: its calls (``exec``, file transfers, path
checks) travel as JSON lines over socket *N*; file contents travel in the messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import importlib
import os
import signal
import socket
import sys
import traceback
from collections.abc import Generator
from pathlib import Path
from typing import Any
from uuid import UUID

from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext
from harbor.models.task.config import MCPServerConfig, TaskOS

from posttrainbench.service.mode_b.agent_pipe import (
    MAX_LINE,
    Call,
    ContextUpdate,
    DownloadDirCall,
    DownloadFileCall,
    ExecCall,
    Hello,
    Init,
    PathCheckCall,
    PhaseDone,
    PhaseFailed,
    ProxyMessage,
    Reply,
    Start,
    Stop,
    UploadDirCall,
    UploadFileCall,
    _Msg,
    decode_b64,
    encode,
    pack_dir,
    parse_proxy_message,
    read_line,
    unpack_dir,
)


class RemoteEnvironmentError(RuntimeError):
    """The real environment refused or failed a call (its error line is the message)."""


class Channel:
    """The candidate end of the socket: replies resolve pending calls, the rest is queued."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.control: asyncio.Queue[ProxyMessage | None] = asyncio.Queue()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start reading."""
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            while (line := await read_line(self.reader)) is not None:
                message = parse_proxy_message(line)
                if isinstance(message, Reply):
                    future = self._pending.pop(message.id, None)
                    if future is not None and not future.done():
                        future.set_result(message)
                else:
                    await self.control.put(message)
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RemoteEnvironmentError("the proxy closed the connection"))
            await self.control.put(None)

    async def send(self, message: _Msg) -> None:
        """Write one message."""
        async with self._lock:
            self.writer.write(encode(message))
            await self.writer.drain()

    async def call(self, request: Any) -> dict[str, Any]:
        """Send one environment call and wait for its reply's value."""
        call_id, self._next_id = self._next_id, self._next_id + 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        await self.send(Call(type="call", id=call_id, call=request))
        reply: Reply = await future
        if not reply.ok:
            raise RemoteEnvironmentError(reply.error or "the environment call failed")
        return reply.value or {}


class RemoteEnvironment:
    """What the candidate's agent sees as its Harbor environment (the calls agents use)."""

    def __init__(self, channel: Channel, start: Start, context: AgentContext | None) -> None:
        self._channel, self._context = channel, context
        self._last_context: dict[str, Any] | None = None
        self.default_user: str | int | None = start.default_user
        self.session_id = start.session_id
        self.os = TaskOS(start.os)

    @property
    def task_os(self) -> TaskOS:
        """Harbor's deprecated alias of :attr:`os`."""
        return self.os

    @contextlib.contextmanager
    def with_default_user(self, user: str | int | None) -> Generator[None, None, None]:
        """Temporarily change the default user of this agent's calls."""
        previous, self.default_user = self.default_user, user
        try:
            yield
        finally:
            self.default_user = previous

    async def _call(self, request: Any) -> dict[str, Any]:
        if self._context is not None:  # keep the proxy's copy current, in case the run is cut off
            snapshot = self._context.model_dump(mode="json")
            if snapshot != self._last_context:
                await self._channel.send(ContextUpdate(type="context", context=snapshot))
                self._last_context = snapshot
        return await self._channel.call(request)

    def _user(self, user: str | int | None) -> str | int | None:
        return self.default_user if user is None else user

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run *command* in the environment."""
        value = await self._call(
            ExecCall(
                method="exec",
                command=command,
                cwd=cwd,
                env=env,
                timeout_sec=timeout_sec,
                user=self._user(user),
            )
        )
        return ExecResult.model_validate(value)

    async def is_dir(self, path: str, user: str | int | None = None) -> bool:
        """Whether *path* is a directory in the environment."""
        return bool(
            (await self._call(PathCheckCall(method="is_dir", path=path, user=self._user(user))))[
                "value"
            ]
        )

    async def is_file(self, path: str, user: str | int | None = None) -> bool:
        """Whether *path* is a file in the environment."""
        return bool(
            (await self._call(PathCheckCall(method="is_file", path=path, user=self._user(user))))[
                "value"
            ]
        )

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a local file (read here, as the candidate user) into the environment."""
        data = Path(source_path).read_bytes()
        await self._call(UploadFileCall(method="upload_file", target_path=target_path, data=data))

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a local directory's files and subdirectories into the environment."""
        data = await asyncio.to_thread(pack_dir, Path(source_dir))
        await self._call(UploadDirCall(method="upload_dir", target_dir=target_dir, tar=data))

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a file of the environment to a local path."""
        value = await self._call(DownloadFileCall(method="download_file", source_path=source_path))
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(decode_b64(value["data"]))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a directory of the environment into a local directory (merging)."""
        value = await self._call(DownloadDirCall(method="download_dir", source_dir=source_dir))
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(unpack_dir, decode_b64(value["tar"]), Path(target_dir))


def _import_class(import_path: str) -> type:
    module_name, _, class_name = import_path.partition(":")
    found = getattr(importlib.import_module(module_name), class_name)
    if not isinstance(found, type):
        raise TypeError(f"{import_path} is not a class")
    return found


def _error_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def serve(channel: Channel) -> int:
    """Build the agent from the proxy's Init, then run the phases it asks for."""
    init = await channel.control.get()
    if not isinstance(init, Init):
        return 2
    try:
        extra: dict[str, Any] = {}
        if init.mcp_servers:  # passed only when the task has some, as Harbor does
            extra["mcp_servers"] = [MCPServerConfig.model_validate(m) for m in init.mcp_servers]
        if init.skills_dir:
            extra["skills_dir"] = init.skills_dir
        agent = _import_class(init.import_path)(
            logs_dir=Path(init.logs_dir), model_name=init.model_name, **extra, **init.kwargs
        )
        agent.session_id = init.session_id
        agent.context_id = UUID(init.context_id) if init.context_id else None
        await channel.send(Hello(type="hello", agent_info=agent.to_agent_info()))
    except Exception as exc:
        await channel.send(
            PhaseFailed(
                type="failed",
                phase="init",
                error=_error_line(exc),
                traceback=traceback.format_exc()[-100_000:],
            )
        )
        return 1
    while True:
        start = await channel.control.get()
        if start is None or isinstance(start, Stop):
            return 0
        if not isinstance(start, Start):
            return 2
        context = AgentContext() if start.phase == "run" else None
        environment = RemoteEnvironment(channel, start, context)
        try:
            if start.phase == "setup":
                await agent.setup(environment)
            else:
                await agent.run(
                    instruction=start.instruction or "", environment=environment, context=context
                )
        except Exception as exc:
            await channel.send(
                PhaseFailed(
                    type="failed",
                    phase=start.phase,
                    error=_error_line(exc),
                    traceback=traceback.format_exc()[-100_000:],
                )
            )
            continue
        await channel.send(
            PhaseDone(
                type="done",
                phase=start.phase,
                context=context.model_dump(mode="json") if context is not None else None,
            )
        )


def _die_with_parent(parent: int) -> None:
    # The proxy's process ending (even by SIGKILL) must end this one: PR_SET_PDEATHSIG.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


async def _main(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_LINE)
    channel = Channel(reader, writer)
    channel.start()
    try:
        return await serve(channel)
    finally:
        writer.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the agent host process."""
    parser = argparse.ArgumentParser(prog="python -m posttrainbench.service.mode_b.agent_host")
    parser.add_argument("--fd", type=int, required=True, help="the socket to the proxy")
    parser.add_argument("--parent", type=int, required=True, help="the proxy's pid")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    return asyncio.run(_main(args.fd))


if __name__ == "__main__":
    sys.exit(main())
