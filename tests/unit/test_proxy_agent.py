"""The Mode B agent pipe: message round trips and refusals, tar and log copies that never
follow links, and a real agent host process driven by the proxy against a fake environment
(environment calls, context copy, failures, cancellation)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest
from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext
from harbor.models.task.config import EnvironmentConfig, TaskOS
from harbor.models.trial.paths import TrialPaths

from posttrainbench.core.safe_fs import CopyBudget, DirSink, SafeDir
from posttrainbench.service.mode_b.agent_pipe import (
    Call,
    CandidateAgentError,
    CandidateProtocolError,
    ContextUpdate,
    Hello,
    Init,
    PhaseDone,
    PhaseFailed,
    Reply,
    Start,
    Stop,
    encode,
    pack_dir,
    parse_host_message,
    parse_proxy_message,
    read_line,
    unpack_dir,
)
from posttrainbench.service.mode_b.proxy_agent import CandidateProxyAgent, copy_context

BINARY = bytes(range(256)) + b'\n\r{}"\\'


@pytest.fixture(autouse=True)
def _offline_litellm(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # Harbor parses model names with it


# -- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        Call(
            type="call",
            id=3,
            call={
                "method": "exec",
                "command": "echo hi",
                "cwd": "/app",
                "env": {"A": "1"},
                "timeout_sec": 5,
                "user": "agent",
            },
        ),
        Call(
            type="call",
            id=4,
            call={"method": "upload_file", "target_path": "/app/x.bin", "data": BINARY},
        ),
        Call(
            type="call",
            id=5,
            call={"method": "upload_dir", "target_dir": "/app/d", "tar": b"tarbytes"},
        ),
        Call(type="call", id=6, call={"method": "download_file", "source_path": "/app/x"}),
        Call(type="call", id=7, call={"method": "download_dir", "source_dir": "/logs"}),
        Call(type="call", id=8, call={"method": "is_file", "path": "/app/x", "user": 0}),
        Hello(
            type="hello",
            agent_info={
                "name": "candidate",
                "version": "2",
                "model_info": {"name": "x", "provider": "m"},
            },
        ),
        ContextUpdate(type="context", context={"n_input_tokens": 3}),
        PhaseDone(type="done", phase="run", context={"cost_usd": 0.5}),
        PhaseFailed(type="failed", phase="setup", error="ValueError: no", traceback="..."),
    ],
)
def test_candidate_messages_round_trip(message):
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_host_message(line) == message


@pytest.mark.parametrize(
    "message",
    [
        Init(
            type="init",
            import_path="agent:A",
            model_name="m/x",
            kwargs={"t": 0},
            logs_dir="/l",
            session_id="s",
        ),
        Start(
            type="start",
            phase="run",
            instruction="do it\nnow",
            default_user="agent",
            os="linux",
            session_id="s",
        ),
        Reply(type="reply", id=1, ok=True, value={"stdout": "x"}),
        Reply(type="reply", id=2, ok=False, error="FileNotFoundError: /x"),
        Stop(type="stop"),
    ],
)
def test_proxy_messages_round_trip(message):
    assert parse_proxy_message(encode(message)) == message


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b'{"type": "nope"}\n',
        b'{"type": "call", "id": -1, "call": {"method": "exec", "command": "x"}}\n',
        b'{"type": "call", "id": 1, "call": {"method": "rm_rf", "path": "/"}}\n',
        b'{"type": "call", "id": 1, "call": {"method": "exec", "command": ["x"]}}\n',
        b'{"type": "call", "id": 1, "call": {"method": "upload_file", "target_path": "/a", "data": "***"}}\n',
        # File contents travel as bytes: a host path the proxy would open is not part of the protocol.
        b'{"type": "call", "id": 1, "call": {"method": "upload_file", "target_path": "/a", "source_path": "/etc/shadow"}}\n',
        b'{"type": "call", "id": 1, "call": {"method": "upload_file", "target_path": "/a", "data": "", '
        b'"source_path": "/etc/shadow"}}\n',
        b'{"type": "call", "id": 1, "call": {"method": "download_file", "source_path": "/a", "target_path": "/root/x"}}\n',
        b'{"type": "done", "phase": "run", "reward": 1}\n',
        b'{"type": "hello", "agent_info": {"name": "x"}}\n',
    ],
)
def test_bad_candidate_messages_are_refused(line):
    with pytest.raises(CandidateProtocolError):
        parse_host_message(line)


def test_oversized_and_truncated_lines_are_protocol_errors():
    async def read(data: bytes, limit: int) -> bytes | None:
        reader = asyncio.StreamReader(limit=limit)
        reader.feed_data(data)
        reader.feed_eof()
        return await read_line(reader)

    assert asyncio.run(read(b"", 64)) is None
    assert asyncio.run(read(b'{"type": "stop"}\n', 64)) == b'{"type": "stop"}\n'
    with pytest.raises(CandidateProtocolError, match="exceeds"):
        asyncio.run(read(b"x" * 200 + b"\n", 64))
    with pytest.raises(CandidateProtocolError, match="middle"):
        asyncio.run(read(b'{"type": ', 64))


def test_context_is_validated_before_it_is_copied():
    context = AgentContext()
    copy_context({"n_input_tokens": 10, "cost_usd": 0.25, "metadata": {"k": "v"}}, context)
    assert (context.n_input_tokens, context.cost_usd, context.metadata) == (10, 0.25, {"k": "v"})
    with pytest.raises(CandidateProtocolError):
        copy_context({"n_input_tokens": "many"}, context)
    assert context.n_input_tokens == 10


# -- tar and log copies --------------------------------------------------------------------


def _tar(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


def test_tar_round_trip_keeps_files_and_skips_links(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.bin").write_bytes(BINARY)
    (src / "link").symlink_to("/etc/passwd")
    dest = tmp_path / "dest"
    dest.mkdir()
    unpack_dir(pack_dir(src), dest)
    assert (dest / "sub" / "a.bin").read_bytes() == BINARY and not (dest / "link").exists()


@pytest.mark.parametrize("member", ["symlink", "absolute", "dotdot", "hardlink"])
def test_unpack_refuses_links_and_escapes(tmp_path, member):
    info = tarfile.TarInfo({"absolute": "/tmp/evil", "dotdot": "../evil"}.get(member, "evil"))
    if member == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, "/etc"
    elif member == "hardlink":
        info.type, info.linkname = tarfile.LNKTYPE, "/etc/passwd"
    else:
        info.size = 1
    with pytest.raises(CandidateProtocolError):
        unpack_dir(_tar(info), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_log_copy_never_follows_links_or_overwrites(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("service secret")
    session, dest = tmp_path / "session", tmp_path / "dest"
    src = session / "logs"
    (src / "d").mkdir(parents=True)
    (src / "d" / "trace.json").write_text("{}")
    (src / "steal").symlink_to(secret)  # a link in the candidate's dir is not copied
    (src / "pwn").mkdir()
    (src / "pwn" / "x").write_text("into a planted link?")
    (src / "zz.log").write_text("y" * 100)  # over what the budget has left: not copied
    (src / "keep.txt").write_text("candidate")
    (session / "host.log").write_text("host")
    dest.mkdir()
    (dest / "pwn").symlink_to(
        tmp_path / "outside"
    )  # planted on the trial side, e.g. through a mount
    (tmp_path / "outside").mkdir()
    (dest / "keep.txt").write_text("harbor's")
    budget = CopyBudget(max_bytes=50, max_files=100)
    with SafeDir.open(session) as root, DirSink(dest) as sink:
        root.copy_entries("logs", sink, budget)
        root.copy_entries("", sink, budget, renamed={"host.log": "candidate-host.log"})
    assert (dest / "d" / "trace.json").read_text() == "{}"
    assert not (dest / "steal").exists() and list((tmp_path / "outside").iterdir()) == []
    assert (dest / "keep.txt").read_text() == "harbor's"
    assert not (dest / "zz.log").exists()
    assert (dest / "candidate-host.log").read_text() == "host"
    assert {line.split(":")[0] for line in budget.refused} == {
        "logs/keep.txt",
        "logs/pwn",
        "logs/steal",
        "logs/zz.log",
    }


# -- a real agent host against a fake environment ------------------------------------------

AGENT = """
import asyncio, json, os
from pathlib import Path
from harbor.agents.base import BaseAgent


class Candidate(BaseAgent):
    def __init__(self, *args, mode="work", **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode

    @staticmethod
    def name():
        return "toy-candidate"

    def version(self):
        return "7"

    async def setup(self, environment):
        if self.mode == "setup-fails":
            raise ValueError("cannot set up")
        await environment.exec("setup")

    async def run(self, instruction, environment, context):
        context.n_input_tokens = 11
        if self.mode == "stall":
            await environment.exec("stalling")
            (self.logs_dir / "pid").write_text(str(os.getpid()))
            await asyncio.sleep(3600)
        result = await environment.exec(f"say {instruction}", user="root")
        Path("up.bin").write_bytes(bytes(range(256)))
        await environment.upload_file("up.bin", "/app/up.bin")
        Path("tree/sub").mkdir(parents=True)
        Path("tree/sub/f.txt").write_text("f")
        await environment.upload_dir("tree", "/app/tree")
        await environment.download_file("/app/up.bin", "back.bin")
        await environment.download_dir("/app/tree", "back")
        missing = None
        try:
            await environment.download_file("/nope", "nope")
        except Exception as exc:
            missing = str(exc)
        (self.logs_dir / "trace.json").write_text(json.dumps({"ok": True}))
        context.metadata = {
            "stdout": result.stdout, "code": result.return_code, "user": os.getuid(),
            "back": Path("back.bin").read_bytes() == bytes(range(256)),
            "back_dir": Path("back/sub/f.txt").read_text(), "is_file": await environment.is_file("/app/up.bin"),
            "missing": missing, "cwd_is_home": Path.cwd() == Path.home(),
            "secret": os.environ.get("PTB_TEST_SERVICE_SECRET")}
"""


class FakeEnvironment:
    """The few BaseEnvironment members the proxy uses, over a local directory."""

    def __init__(self, root: Path) -> None:
        self.root, self.calls, self.sweeps = root, [], []
        self.default_user, self.os, self.session_id = "agent", TaskOS.LINUX, "trial__env"
        self.task_env_config = EnvironmentConfig()
        self.environment_dir = root.parent / "task" / "environment"
        self.trial_paths = TrialPaths(root.parent / "trial")
        self.instances = 1

    async def stop(self, delete):  # the instance goes, with every file of it
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)

    async def start(self, force_build):
        self.root.mkdir(parents=True, exist_ok=True)
        self.instances += 1

    async def run_healthcheck(self):
        pass

    async def empty_dirs(self, dirs, chmod=True):
        import shutil

        for path in dirs:
            shutil.rmtree(self._host(str(path)), ignore_errors=True)
            self._host(str(path)).mkdir(parents=True)

    def _host(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        if "environment_sweep" in command:  # the proxy's own snapshot and sweep, as root
            self.sweeps.append(command.split()[-1] if "snapshot" in command else "sweep")
            return ExecResult(stdout="", stderr="", return_code=0)
        self.calls.append(("exec", command, user))
        return ExecResult(stdout=f"ran {command}", stderr="", return_code=3)

    async def upload_file(self, source_path, target_path):
        self.calls.append(("upload_file", target_path))
        self._host(target_path).parent.mkdir(parents=True, exist_ok=True)
        self._host(target_path).write_bytes(Path(source_path).read_bytes())

    async def upload_dir(self, source_dir, target_dir):
        import shutil

        self.calls.append(("upload_dir", target_dir))
        shutil.copytree(source_dir, self._host(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path, target_path):
        Path(target_path).write_bytes(self._host(source_path).read_bytes())

    async def download_dir(self, source_dir, target_dir):
        import shutil

        shutil.copytree(self._host(source_dir), target_dir, dirs_exist_ok=True)

    async def is_file(self, path, user=None):
        return self._host(path).is_file()

    async def is_dir(self, path, user=None):
        return self._host(path).is_dir()


def make_proxy(tmp_path: Path, mode: str = "work") -> CandidateProxyAgent:
    code = tmp_path / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "cand_agent.py").write_text(AGENT)
    (tmp_path / "agents").mkdir(exist_ok=True)
    (tmp_path / "trial" / "agent").mkdir(parents=True, exist_ok=True)
    # No model name: parsing one imports LiteLLM, seconds of start-up per host process.
    proxy = CandidateProxyAgent(
        tmp_path / "trial" / "agent",
        candidate={
            "import_path": "cand_agent:Candidate",
            "kwargs": {"mode": mode},
            "code_dir": str(code),
            "host_dir": str(tmp_path / "agents"),
            "python": sys.executable,
            "path": os.environ["PATH"],
        },
    )
    proxy.session_id = "trial__agent"
    return proxy


def test_proxy_runs_the_candidate_in_a_host_process(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "PTB_TEST_SERVICE_SECRET", "s3cret"
    )  # the proxy's environment, not the host's
    env = FakeEnvironment(tmp_path / "envroot")
    proxy = make_proxy(tmp_path)
    context = AgentContext()

    async def trial() -> None:
        await proxy.setup(env)
        await proxy.run("hello", env, context)

    asyncio.run(trial())
    assert proxy.to_agent_info().name == "toy-candidate" and proxy.to_agent_info().version == "7"
    assert env.calls[:2] == [("exec", "setup", "agent"), ("exec", "say hello", "root")]
    # The environment's processes were recorded before the candidate's first call and
    # everything else swept when it was done.
    assert env.sweeps == ["snapshot", "sweep"]
    assert ("upload_dir", "/app/tree") in env.calls
    # The verifier gets a fresh instance holding only the outputs (environment_reset).
    assert env.instances == 2
    assert (env.root / "app" / "up.bin").read_bytes() == bytes(range(256))
    assert context.n_input_tokens == 11
    meta = context.metadata
    assert meta["stdout"] == "ran say hello" and meta["code"] == 3 and meta["user"] == os.getuid()
    assert meta["back"] and meta["back_dir"] == "f" and meta["is_file"] and meta["cwd_is_home"]
    assert meta["missing"].startswith("FileNotFoundError") and meta["secret"] is None
    agent_dir = tmp_path / "trial" / "agent"
    assert json.loads((agent_dir / "trace.json").read_text()) == {"ok": True}
    assert (agent_dir / "candidate-host.log").is_file()


def test_candidate_failure_becomes_a_trial_error(tmp_path):
    env = FakeEnvironment(tmp_path / "envroot")
    proxy = make_proxy(tmp_path, mode="setup-fails")
    with pytest.raises(CandidateAgentError, match="ValueError: cannot set up"):
        asyncio.run(proxy.setup(env))
    bad = make_proxy(tmp_path / "other")
    bad.spec = bad.spec.model_copy(update={"import_path": "cand_agent:Missing"})
    with pytest.raises(CandidateAgentError, match="init failed: AttributeError"):
        asyncio.run(bad.setup(env))


def test_timeout_kills_the_host_and_keeps_the_context_so_far(tmp_path):
    env = FakeEnvironment(tmp_path / "envroot")
    proxy = make_proxy(tmp_path, mode="stall")
    context = AgentContext()

    async def trial() -> None:
        await proxy.setup(env)
        await asyncio.wait_for(proxy.run("x", env, context), timeout=3)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(trial())
    assert context.n_input_tokens == 11  # sent along with the environment call before the stall
    # Its logs were copied into the trial and its private dirs deleted.
    assert not (tmp_path / "agents" / "trial__agent").exists()
    pid = int((Path(proxy.logs_dir) / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_base64_payload_decodes_to_bytes():
    good = base64.b64encode(b"abc").decode()
    line = json.dumps(
        {
            "type": "call",
            "id": 1,
            "call": {"method": "upload_file", "target_path": "/a", "data": good},
        }
    ).encode()
    assert parse_host_message(line).call.data == b"abc"
