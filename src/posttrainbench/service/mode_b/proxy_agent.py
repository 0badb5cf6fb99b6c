"""Mode B's trusted stand-in for a candidate agent class.

The nested Harbor job runs as the service's user and never imports candidate code: its
agent is :class:`CandidateProxyAgent`. The proxy starts ``python -m
posttrainbench.service.mode_b.agent_host`` as the candidate user (see ``runas``), which builds
the candidate's agent class and hands it a stand-in environment; every environment call
comes back over a socket as one JSON line and the proxy performs it on the real
environment. File contents travel in the messages (base64; directories as tar), so the
proxy never opens a host path the candidate names, and the candidate never touches the
jobs dir, where Harbor's verifier writes the rewards.

Everything the candidate side sends is validated (:mod:`~posttrainbench.service.mode_b.agent_pipe`);
a bad message ends the trial with :class:`CandidateProtocolError`.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.result import AgentInfo
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrainbench.core.nofollow import open_for_writing
from posttrainbench.core.safe_fs import CopyBudget, DirSink, SafeDir
from posttrainbench.service.mode_b import environment_reset, environment_sweep
from posttrainbench.service.mode_b.agent_pipe import (
    MAX_LINE,
    Call,
    CandidateAgentError,
    CandidateProtocolError,
    ContextUpdate,
    DownloadDirCall,
    DownloadFileCall,
    ExecCall,
    Hello,
    Init,
    PathCheckCall,
    PhaseDone,
    PhaseFailed,
    Reply,
    Start,
    Stop,
    UploadDirCall,
    UploadFileCall,
    _Msg,
    encode,
    pack_dir,
    parse_host_message,
    read_line,
    unpack_dir,
)
from posttrainbench.service.shared.config import CandidateLimits, ScoringModeB
from posttrainbench.service.shared.errors import ServiceStateError
from posttrainbench.service.shared.identity import Identity, IdentityPool, current_identity, reap
from posttrainbench.service.shared.runas import allowlisted_env, confined_argv

MAX_LOGS_BYTES = 64 * 1024 * 1024  # candidate logs copied back into the trial, in total
MAX_LOG_FILES = 10_000
MAX_IN_FLIGHT = 32  # environment calls the candidate may have running at once
STOP_GRACE_S = 5.0
HOST_CHECK_TIMEOUT_S = 120.0  # importing Harbor is slow on a loaded machine


# -- the proxy ---------------------------------------------------------------------------


class CandidateSpec(BaseModel):
    """What the proxy needs to run the candidate (the nested job's agent kwargs)."""

    model_config = ConfigDict(extra="forbid")

    import_path: str
    model_name: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)
    code_dir: Path = Field(description="the candidate's clean export, put first on its PYTHONPATH")
    host_dir: Path = Field(
        description="root-owned dir; one private subdir per trial is handed to its uid"
    )
    identity_pool: Path | None = Field(
        default=None,
        description="the service's pool of fresh uids (None: run as this process's user)",
    )
    limits: CandidateLimits = Field(default_factory=CandidateLimits)
    python: str = Field(
        description="interpreter of the agent host (must load this service's harbor)"
    )
    path: str = Field(description="PATH of the agent host")
    pass_env: list[str] = Field(
        default_factory=list, description="names of non-secret variables passed on"
    )
    network: bool = Field(default=True, description="the agent host may open sockets")

    def issue_identity(self) -> Identity:
        """A fresh identity for one agent host."""
        return (
            IdentityPool(self.identity_pool).issue() if self.identity_pool else current_identity()
        )


def trusted_lib_path() -> list[str]:
    """Where this process loads posttrainbench and harbor from (after the candidate's code)."""
    import harbor

    import posttrainbench

    dirs = [
        str(Path(str(module.__file__)).resolve().parent.parent)
        for module in (posttrainbench, harbor)
    ]
    return list(dict.fromkeys(dirs))


def check_agent_host(scoring: ScoringModeB, limits: CandidateLimits, pool: IdentityPool) -> None:
    """Raise one line when a fresh candidate uid cannot start the agent host (checked once,
    before serving). Otherwise every nested trial would error with the same cause, after the
    budget is charged."""
    identity = pool.issue()
    if not identity.switches:
        return
    python = scoring.agent_python or sys.executable
    env = allowlisted_env(
        scoring.path,
        Path("/"),
        scoring.pass_env,
        {"PYTHONPATH": os.pathsep.join(trusted_lib_path())},
    )
    argv = confined_argv(
        identity,
        [python, "-c", "import posttrainbench.service.mode_b.agent_host"],
        cwd=Path("/"),
        writable=[],
        limits=limits,
        network=scoring.network,
    )
    try:
        result = subprocess.run(
            argv, env=env, cwd="/", capture_output=True, text=True, timeout=HOST_CHECK_TIMEOUT_S
        )
        problem = (
            (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
            if result.returncode != 0
            else None
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    finally:
        reap(identity)
    if problem:
        raise ServiceStateError(
            f"a candidate uid cannot start the Mode B agent host with {python} "
            f"({problem}): set scoring.agent_python to an interpreter any user can run"
        )


class CandidateProxyAgent(BaseAgent):
    """A Harbor agent that runs the candidate's agent class in an unprivileged child process."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *args: Any,
        candidate: dict[str, Any],
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir, model_name, *args, **kwargs)
        self.spec = CandidateSpec.model_validate(candidate)
        self._session: HostSession | None = None
        self._hello: Hello | None = None
        self._spared: list[str] | None = None  # the environment's own processes

    @staticmethod
    def name() -> str:
        return "ptb-candidate-proxy"

    def version(self) -> str:
        return "1"

    def to_agent_info(self) -> AgentInfo:
        """Harbor's record names the candidate's class (and its model) once it said who it is."""
        if self._hello is None:
            return super().to_agent_info()
        return self._hello.agent_info

    async def setup(self, environment: BaseEnvironment) -> None:
        """Record the environment's own processes, start the agent host and run the
        candidate's ``setup`` (after a failure, whatever it started is stopped)."""
        if self._spared is None:
            self._spared = await environment_sweep.snapshot(environment)
        try:
            await self._ensure_session()
            await self._phase(Start(type="start", phase="setup"), environment, None)
        except BaseException:
            await self._stop_all(environment)
            raise

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        """Run the candidate's ``run``; then, whatever happens, the host and everything the
        candidate started in the environment are stopped and the environment is replaced by a
        fresh instance holding only the task's outputs (``environment_reset``), before the
        task's verifier runs."""
        if self._spared is None:
            self._spared = await environment_sweep.snapshot(environment)
        try:
            await self._ensure_session()
            await self._phase(
                Start(type="start", phase="run", instruction=instruction), environment, context
            )
        finally:
            await self._stop_all(environment, reset=True)

    async def _stop_all(self, environment: BaseEnvironment, reset: bool = False) -> None:
        try:
            await self.close()
        finally:
            try:
                report = await environment_sweep.sweep(environment, self._spared or [])
            except ServiceStateError as exc:
                raise environment_reset.UnverifiableEnvironmentError(str(exc)) from None
            self.logger.debug("candidate's processes in the environment: %s", report)
            if reset:
                keep = environment_reset.carried_paths(environment)
                carried = await environment_reset.fresh_instance(environment, keep)
                self.logger.debug("fresh instance for the verifier, carrying %s", carried)

    async def close(self, graceful: bool = True) -> None:
        """Stop the agent host (its whole process group) and copy its logs into the trial."""
        session, self._session = self._session, None
        if session is not None:
            await session.stop(graceful)
            session.copy_logs_to(Path(self.logs_dir))
            session.discard()

    async def _ensure_session(self) -> None:
        if self._session is None:
            self._session = await HostSession.start(self.spec, self.session_id or "agent")
            await self._session.send(
                Init(
                    type="init",
                    import_path=self.spec.import_path,
                    model_name=self.spec.model_name or self.model_name,
                    kwargs=self.spec.kwargs,
                    logs_dir=str(self._session.logs_dir),
                    session_id=self.session_id,
                    context_id=str(self.context_id) if self.context_id else None,
                    mcp_servers=[m.model_dump(mode="json") for m in self.mcp_servers],
                    skills_dir=self.skills_dir,
                )
            )

    async def _phase(
        self, start: Start, environment: BaseEnvironment, context: AgentContext | None
    ) -> None:
        assert self._session is not None
        start = start.model_copy(
            update={
                "default_user": environment.default_user,
                "os": str(environment.os.value),
                "session_id": environment.session_id,
            }
        )
        try:
            hello = await self._session.run_phase(start, environment, context)
        except BaseException:
            await self.close(
                graceful=False
            )  # timeout (cancel), protocol error or failure: the host goes
            raise
        self._hello = hello or self._hello


class HostSession:
    """One running agent host: its process, socket, private dirs and in-flight calls."""

    def __init__(
        self,
        spec: CandidateSpec,
        identity: Identity,
        session_dir: Path,
        proc: asyncio.subprocess.Process,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.spec, self.identity, self.session_dir, self.proc = spec, identity, session_dir, proc
        self.reader, self.writer = reader, writer
        self.logs_dir = session_dir / "logs"
        self._write_lock = asyncio.Lock()
        self._calls: set[asyncio.Task[None]] = set()
        self._hello_seen = False

    @classmethod
    async def start(cls, spec: CandidateSpec, session_id: str) -> HostSession:
        """Make the trial's private dirs and start ``agent_host`` as a fresh uid, confined."""
        safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in session_id)[:200]
        session_dir = spec.host_dir / safe
        if session_dir.is_symlink():
            session_dir.unlink()
        elif session_dir.exists():
            shutil.rmtree(
                session_dir
            )  # a retried trial of the same name; rmtree never follows links
        session_dir.mkdir(mode=0o711, parents=True)
        identity = await asyncio.to_thread(spec.issue_identity)
        for name in ("home", "logs"):
            (session_dir / name).mkdir(mode=0o700)
            if identity.switches:  # fresh uid, nothing of it running yet, parent root's: no race
                assert identity.uid is not None and identity.gid is not None  # switches says so
                os.chown(session_dir / name, identity.uid, identity.gid)
        env = allowlisted_env(
            spec.path,
            session_dir / "home",
            spec.pass_env,
            {
                "PYTHONPATH": os.pathsep.join([str(spec.code_dir), *trusted_lib_path()]),
                "HARBOR_TELEMETRY": "0",
                "TMPDIR": str(session_dir / "home"),
                # Harbor parses model names with LiteLLM, which otherwise fetches a price list first.
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            },
        )
        ours, theirs = socket.socketpair()
        log_fd = open_for_writing(session_dir / "host.log", 0o600, append=False)
        try:
            argv = confined_argv(
                identity,
                [
                    spec.python,
                    "-m",
                    "posttrainbench.service.mode_b.agent_host",
                    "--fd",
                    str(theirs.fileno()),
                    "--parent",
                    str(os.getpid()),
                ],
                cwd=session_dir / "home",
                writable=[session_dir / "home", session_dir / "logs"],
                limits=spec.limits,
                network=spec.network,
            )
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                env=env,
                cwd="/",
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise CandidateAgentError(
                f"cannot start the candidate's agent host: {exc.strerror}"
            ) from None
        finally:
            theirs.close()
            os.close(log_fd)
        reader, writer = await asyncio.open_connection(sock=ours, limit=MAX_LINE)
        return cls(spec, identity, session_dir, proc, reader, writer)

    async def send(self, message: _Msg) -> None:
        """Write one message (never interleaved with another)."""
        async with self._write_lock:
            self.writer.write(encode(message))
            await self.writer.drain()

    async def run_phase(
        self, start: Start, environment: BaseEnvironment, context: AgentContext | None
    ) -> Hello | None:
        """Send *start*, serve environment calls until the phase ends; return the Hello if one came."""
        await self.send(start)
        hello = None
        try:
            while True:
                line = await read_line(self.reader)
                if line is None:
                    code = await self._exit_code()
                    raise CandidateAgentError(
                        f"the candidate's agent host exited during {start.phase} "
                        f"(exit code {code}); see candidate-host.log"
                    )
                message = parse_host_message(line)
                if isinstance(message, Hello):
                    if self._hello_seen:
                        raise CandidateProtocolError("the candidate side said hello twice")
                    self._hello_seen, hello = True, message
                elif isinstance(message, Call):
                    if len(self._calls) >= MAX_IN_FLIGHT:
                        await self.send(
                            Reply(
                                type="reply",
                                id=message.id,
                                ok=False,
                                error=f"more than {MAX_IN_FLIGHT} calls in flight",
                            )
                        )
                        continue
                    task = asyncio.create_task(self._answer(message, environment))
                    self._calls.add(task)
                    task.add_done_callback(self._calls.discard)
                elif isinstance(message, ContextUpdate):
                    copy_context(message.context, context)
                elif isinstance(message, PhaseFailed):
                    raise CandidateAgentError(
                        f"candidate agent {message.phase} failed: {message.error}"
                    )
                elif isinstance(message, PhaseDone):
                    if message.phase != start.phase:
                        raise CandidateProtocolError(f"{message.phase} done during {start.phase}")
                    if message.context is not None:
                        copy_context(message.context, context)
                    return hello
        finally:
            for task in list(self._calls):  # a finished phase leaves no call running
                task.cancel()

    async def _answer(self, message: Call, environment: BaseEnvironment) -> None:
        try:
            value = await perform(message.call, environment)
            reply = Reply(type="reply", id=message.id, ok=True, value=value)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the environment's error goes back to the candidate, as one line
            text = (
                f"{type(exc).__name__}: {exc}".splitlines()[0][:2000]
                if str(exc)
                else type(exc).__name__
            )
            reply = Reply(type="reply", id=message.id, ok=False, error=text)
        try:
            await self.send(reply)
        except (ConnectionError, RuntimeError):
            pass  # the host is gone; the phase loop reports it

    async def _exit_code(self) -> int | None:
        try:
            return await asyncio.wait_for(self.proc.wait(), STOP_GRACE_S)
        except TimeoutError:
            return None

    async def stop(self, graceful: bool = True) -> None:
        """Kill the host's process group (leftover children included); *graceful*: ask it to exit first."""
        if graceful:
            try:
                await asyncio.wait_for(self.send(Stop(type="stop")), 1.0)
                await asyncio.wait_for(asyncio.shield(self.proc.wait()), STOP_GRACE_S)
            except (TimeoutError, ConnectionError, RuntimeError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            await asyncio.wait_for(asyncio.shield(self.proc.wait()), STOP_GRACE_S)
        except (TimeoutError, asyncio.CancelledError):
            pass
        # Whatever it started, however it daemonized: gone before its logs are read.
        await asyncio.to_thread(reap, self.identity)
        self.writer.close()

    def discard(self) -> None:
        """Delete the trial's private dirs once their logs are copied: nothing of the candidate's
        uid may outlive its trial (the audit's sweep looks), and its uid is reaped by now, so
        nothing can race the removal (``rmtree`` never follows links)."""
        shutil.rmtree(self.session_dir, ignore_errors=True)

    def copy_logs_to(self, dest: Path) -> None:
        """Copy the host's private logs (and its output, as ``candidate-host.log``) into *dest*."""
        dest.mkdir(parents=True, exist_ok=True)
        budget = CopyBudget(max_bytes=MAX_LOGS_BYTES, max_files=MAX_LOG_FILES)
        # The session dir is root's (0711): the candidate owns only what is below it.
        with SafeDir.open(self.session_dir) as session, DirSink(dest) as sink:
            session.copy_entries("logs", sink, budget)
            session.copy_entries("", sink, budget, renamed={"host.log": "candidate-host.log"})


def copy_context(data: dict[str, Any], context: AgentContext | None) -> None:
    """Validate the candidate's AgentContext and copy its fields into Harbor's *context*."""
    try:
        reported = AgentContext.model_validate(data)
    except ValidationError as exc:
        raise CandidateProtocolError(f"bad agent context: {str(exc).splitlines()[0]}") from None
    if context is None:
        return
    for field in AgentContext.model_fields:
        setattr(context, field, getattr(reported, field))


async def perform(call: Any, environment: BaseEnvironment) -> dict[str, Any]:
    """Do one candidate call on the real environment; files go through a private temp dir."""
    if isinstance(call, ExecCall):
        result = await environment.exec(
            call.command, cwd=call.cwd, env=call.env, timeout_sec=call.timeout_sec, user=call.user
        )
        return {"stdout": result.stdout, "stderr": result.stderr, "return_code": result.return_code}
    if isinstance(call, PathCheckCall):
        check = environment.is_dir if call.method == "is_dir" else environment.is_file
        return {"value": bool(await check(call.path, user=call.user))}
    with tempfile.TemporaryDirectory(prefix="ptb-proxy-") as tmp:  # 0700, this process's own
        local = Path(tmp) / "x"
        if isinstance(call, UploadFileCall):
            local.write_bytes(call.data)
            await environment.upload_file(local, call.target_path)
            return {}
        if isinstance(call, UploadDirCall):
            local.mkdir()
            await asyncio.to_thread(unpack_dir, call.tar, local)
            await environment.upload_dir(local, call.target_dir)
            return {}
        if isinstance(call, DownloadFileCall):
            await environment.download_file(call.source_path, local)
            info = os.lstat(local)
            if not stat.S_ISREG(info.st_mode):
                raise FileNotFoundError(f"{call.source_path} is not a regular file")
            _check_size(info.st_size, call.source_path)
            return {"data": base64.b64encode(local.read_bytes()).decode("ascii")}
        if isinstance(call, DownloadDirCall):
            local.mkdir()
            await environment.download_dir(call.source_dir, local)
            data = await asyncio.to_thread(pack_dir, local)
            _check_size(len(data), call.source_dir)
            return {"tar": base64.b64encode(data).decode("ascii")}
    raise CandidateProtocolError(f"unknown call {call!r}")  # unreachable: the models are exhaustive


def _check_size(size: int, what: str) -> None:
    # base64 grows the payload by 4/3; the reply must stay within one line.
    if size * 4 // 3 > MAX_LINE - 4096:
        raise OSError(
            f"{what}: {size} bytes is more than one transfer carries ({MAX_LINE * 3 // 4})"
        )
