"""The sandbox of PostTrainBench's agentic judges (task/integrity/agentic/sandbox.py): a judge
CLI reads a prompt-injected trace, so it must see its workspace and nothing else of the
verifier, reach its model's endpoint and nothing else, and whatever it writes, a verdict
that is not exactly PostTrainBench's fields leaves it undecided, never clean.

The "CLI" here is a script standing in for Codex (the real CLIs run in the trial test,
tests/integration/test_agentic_judges_trial.py); each probe prints BLOCKED or LEAKED.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from posttrainbench.task.integrity.agentic.config import AgenticConfig
from posttrainbench.task.integrity.agentic.run import run_agentic_judges
from posttrainbench.task.integrity.agentic.verdicts import AgenticStatus
from posttrainbench.task.integrity.agentic.workspace import WorkspaceSources
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent
from tests.sandbox_support import requires_bwrap

pytestmark = [requires_bwrap, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

KEY = "sk-judge-key-canary-41"
VERIFIER_SECRET = "sk-verifier-env-canary-17"
CLEAN = json.dumps(
    {
        "contamination": False,
        "disallowed_model": False,
        "justification_contamination": "none",
        "justification_disallowed_model": "none",
    }
)

PROBES = r"""
import os, socket, sys
def probe(name, fn):
    try:
        out = fn()
    except Exception as exc:
        print(f"{name}: BLOCKED ({type(exc).__name__})")
    else:
        print(f"{name}: LEAKED {out!r}"[:300])
def connect(host, port):
    with socket.create_connection((host, port), timeout=3) as s:
        return s.recv(64)
other, host_addr, secret = sys.argv[1], sys.argv[2], sys.argv[3]
probe("other port on loopback", lambda: connect("127.0.0.1", int(other)))
probe("other port on the host address", lambda: connect(host_addr, int(other)))
probe("host secret file", lambda: open(secret).read())
probe("write the trace", lambda: open("../solve_parsed.txt", "a").write("x"))
probe("new file beside the task", lambda: open("../planted.txt", "w").write("x"))
probe("verifier's environment", lambda: [p for p in os.listdir("/proc") if p.isdigit() and
      os.environ.get("X") is None and b"sk-verifier" in open(f"/proc/{p}/environ", "rb").read()] or
      (_ for _ in ()).throw(PermissionError("none readable")))
print("endpoint:", connect("127.0.0.1", int(sys.argv[4])))
print("env keys:", sorted(os.environ))
print("key:", os.environ.get("CODEX_API_KEY"))
print("root:", sorted(os.listdir("/")))
"""


class _Banner:
    """A TCP server that answers every connection with one line."""

    def __init__(self, text: bytes):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.text = text
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(self.text)
            conn.close()


def _host_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))
        return s.getsockname()[0]


def _fake_cli(tmp_path: Path, body: str) -> Path:
    root = tmp_path / "clis"
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "codex"
    script.write_text("#!/bin/bash\n" + body)
    script.chmod(0o755)
    root.chmod(0o755)
    tmp_path.chmod(0o755)
    return root


def _judge(
    tmp_path: Path, cli_body: str, monkeypatch, timeout_s: float = 60
) -> tuple[AgenticStatus, Path]:
    monkeypatch.setenv("PTB_TEST_VERIFIER_SECRET", VERIFIER_SECRET)
    endpoint = _Banner(b"ENDPOINT-OK\n")
    root = _fake_cli(tmp_path, cli_body.replace("@ENDPOINT@", str(endpoint.port)))
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "train.py").write_text("print(1)\n")
    out = tmp_path / "out"
    out.mkdir()
    config = AgenticConfig(
        model="gpt-x",
        api_key=KEY,
        base_url=f"http://127.0.0.1:{endpoint.port}/v1",
        timeout_s=timeout_s,
    )
    trace = NormalizedTrace(format="raw", events=[TraceEvent(index=0, kind="shell", command="ls")])
    status = run_agentic_judges(
        config,
        WorkspaceSources(
            code_snapshot=snapshot, test_items=[{"question": "q", "answer": "a"}], traces=[trace]
        ),
        "gsm8k",
        "Qwen/Qwen3-1.7B-Base",
        out,
        cli_dir=str(root),
    )
    return status, out


def test_the_judge_sees_its_workspace_its_endpoint_and_nothing_else(
    tmp_path: Path, monkeypatch
) -> None:
    other = _Banner(b"OTHER-SERVICE\n")
    secret = tmp_path / "host_secret.txt"
    secret.write_text("sk-host-file-canary-3")
    (tmp_path / "probes.py").write_text(PROBES)
    body = (
        f"python /dev/stdin {other.port} {_host_address()} {secret} @ENDPOINT@ <<'PY'\n{PROBES}\nPY\n"
        f"echo '{CLEAN}' > judgement.json\n"
    )
    status, out = _judge(tmp_path, body, monkeypatch)
    text = (out / "judge_output_gpt5_4.json").read_text()
    lines = [line for line in text.splitlines() if ": " in line]
    probes = [line for line in lines if "BLOCKED" in line or "LEAKED" in line]
    assert len(probes) == 6 and all("BLOCKED" in p for p in probes), text
    assert "endpoint: b'ENDPOINT-OK\\n'" in text, text  # its one way out works
    assert VERIFIER_SECRET not in text and "sk-host-file-canary-3" not in text
    # the key reaches the CLI's environment only, and never the output kept
    assert "key: [REDACTED]" in text and KEY not in text
    root_line = next(line for line in lines if line.startswith("root:"))
    assert "'home'" in root_line and "'proc'" in root_line
    assert status.judges[0].status == "decided"
    for name in os.listdir(out):
        assert VERIFIER_SECRET not in (out / name).read_text(errors="replace")


@pytest.mark.parametrize(
    "body, reason",
    [
        ("echo '{\"contamination\": fal' > judgement.json\n", "not valid JSON"),
        ("echo '{\"contamination\": false}' > judgement.json\n", "judgement.json: "),
        ("echo I forgot to write it\n", "judgement.json not created"),
        ("ln -s ../solve_parsed.txt judgement.json\n", "judgement.json unreadable"),
        ("sleep 600\n", "stopped at its time cap"),
    ],
)
def test_a_judge_without_a_valid_verdict_is_undecided_never_clean(
    tmp_path: Path, monkeypatch, body: str, reason: str
) -> None:
    status, out = _judge(tmp_path, body, monkeypatch, timeout_s=3 if "sleep" in body else 60)
    for run in status.judges:  # gpt5_4 and api, both this CLI
        assert run.status == "undecided" and run.flagged() is None, run
        assert reason in (run.reason or ""), run.reason
    result = json.loads((out / "judge_result.json").read_text())
    assert result["contamination"] is None and result["disallowed_api_usage"] is None
    assert not (out / "judgement_gpt5_4.json").exists()
