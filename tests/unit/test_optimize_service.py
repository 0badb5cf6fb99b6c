"""The evaluation service over HTTP (FastAPI TestClient), with real git repos and real candidate runs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from posttrainbench.service.api import service as service_module
from posttrainbench.service.api.service import create_app, ensure_admin_token
from posttrainbench.service.shared.errors import ServiceStateError
from posttrainbench.service.shared.identity import IdentityPool
from tests.optimize_fixtures import PARTIAL, PERFECT, commit, make_task, needs_root, open_dir


class Task:
    """A toy task: config, agent repo with PARTIAL then PERFECT commits, a state dir."""

    def __init__(self, root: Path, state_parent: Path, **overrides):
        self.config = make_task(root, **overrides)
        self.repo = root / "agent"
        self.partial = commit(self.repo, {"solve.py": PARTIAL}, "baseline")
        self.perfect = commit(self.repo, {"solve.py": PERFECT}, "better")
        self.state = state_parent / "state"

    def client(self, **kwargs) -> TestClient:
        return TestClient(create_app(self.state, self.config, agent_repo=self.repo, **kwargs))


@pytest.fixture
def task(tmp_path):
    with open_dir() as parent:  # world-traversable: only the service's own modes protect the state
        yield Task(tmp_path, parent)


def test_status_shows_tiers_and_budgets(task):
    body = task.client().get("/status").json()
    assert (
        body["task"] == "toy-adder" and body["reward_mode"] == "auto_best" and not body["finalized"]
    )
    assert body["splits"]["test"] == {"tier": "hidden"} and "extra" not in body["splits"]
    assert body["splits"]["train"]["runs_left"] == 50 and body["splits"]["train"]["size"] == 8
    assert (
        body["splits"]["dev"]["min_samples"] == 4 and body["splits"]["dev"]["samples_left"] == 200
    )


def test_viewable_eval_returns_per_sample_results(task):
    body = (
        task.client()
        .post("/eval", json={"commit": task.partial, "split": "train", "limit": 4})
        .json()
    )
    assert (body["candidate"], body["commit"], body["tier"], body["n"], body["mean"]) == (
        "candidate-1",
        task.partial,
        "viewable",
        4,
        0.5,
    )
    assert [s["id"] for s in body["samples"]] == ["train-0", "train-1", "train-2", "train-3"]
    assert [s["correct"] for s in body["samples"]] == [True, False, True, False]
    assert body["budget"] == {
        "runs_used": 1,
        "samples_used": 4,
        "runs_left": 49,
        "samples_left": 996,
    }


def _walk(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)
    else:
        yield value


def test_aggregate_eval_never_leaks_per_sample_data(task):
    noisy = commit(
        task.repo,
        {
            "solve.py": PARTIAL.replace(
                "for line in sys.stdin:", "for line in sys.stdin:\n    print(line, file=sys.stderr)"
            )
        },
        "noisy",
    )
    client = task.client()
    response = client.post("/eval", json={"commit": noisy, "split": "dev", "limit": 6})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"candidate", "commit", "split", "tier", "n", "mean", "status", "budget"}
    assert body["tier"] == "aggregate" and body["n"] == 6 and 0 <= body["mean"] <= 1
    text = response.text
    dev = [
        json.loads(line) for line in (task.config.dataset / "dev.jsonl").read_text().splitlines()
    ]
    for sample in dev:  # no id, question or answer appears anywhere in the response
        assert sample["id"] not in text and sample["question"] not in text
        assert sample["answer"] not in {str(v) for v in _walk(body)}
    assert "What is" not in text and "samples" not in set(_walk(body)) and "stderr" not in text


def test_aggregate_refuses_probes_below_min_samples(task):
    client = task.client()
    for limit in (1, 3):
        response = client.post(
            "/eval", json={"commit": task.perfect, "split": "dev", "limit": limit}
        )
        assert response.status_code == 400 and "at least 4 samples" in response.json()["detail"]
    assert (
        client.get("/status").json()["splits"]["dev"]["runs_used"] == 0
    )  # refused before any charge
    full = client.post("/eval", json={"commit": task.perfect, "split": "dev"}).json()
    assert (full["n"], full["mean"]) == (8, 1.0)


@pytest.mark.parametrize("split", ["test", "extra", "nope"])
def test_hidden_and_unlisted_splits_are_refused(task, split):
    client = task.client()
    response = client.post("/eval", json={"commit": task.perfect, "split": split})
    assert response.status_code == 403 and "hidden" in response.json()["detail"]
    assert (
        client.post(
            "/finalize", headers={"Authorization": f"Bearer {client.app.state.service.token}"}
        ).json()["registry"]["candidates"]
        == []
    )  # refused before fetching or charging


def test_bad_commit_is_a_clear_400_and_costs_nothing(task):
    client = task.client()
    for commit_spec in ("0" * 40, "no-such-branch", "HEAD~1"):
        response = client.post("/eval", json={"commit": commit_spec, "split": "train"})
        assert response.status_code == 400 and "commit" in response.json()["detail"]
    assert client.get("/status").json()["splits"]["train"]["runs_used"] == 0


def test_concurrent_evals_never_overspend(task):
    task.config.splits["train"].max_runs = 5
    app = create_app(task.state, task.config, agent_repo=task.repo)
    codes: list[int] = []

    def hit() -> None:
        codes.append(
            TestClient(app)
            .post("/eval", json={"commit": task.perfect, "split": "train", "limit": 2})
            .status_code
        )

    threads = [threading.Thread(target=hit) for _ in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * 5 + [429] * 4
    summary = (
        TestClient(app)
        .post("/finalize", headers={"Authorization": f"Bearer {app.state.service.token}"})
        .json()
    )
    assert len(summary["charges"]) == 5 and len(summary["registry"]["evaluations"]) == 5
    assert (
        summary["usage"]["train"]["runs_left"] == 0
        and summary["usage"]["train"]["samples_used"] == 10
    )


def test_restart_keeps_budget_candidates_and_token(task):
    task.config.splits["train"].max_runs = 2
    first = task.client()
    assert first.post("/eval", json={"commit": task.partial, "split": "train"}).status_code == 200
    token = first.app.state.service.token
    second = task.client()  # a new service on the same state directory
    assert second.app.state.service.token == token
    assert second.get("/status").json()["splits"]["train"]["runs_left"] == 1
    again = second.post("/eval", json={"commit": task.partial, "split": "train"}).json()
    assert again["candidate"] == "candidate-1"
    third = task.client()
    response = third.post("/eval", json={"commit": task.perfect, "split": "train"})
    assert response.status_code == 429 and "run budget exhausted" in response.json()["detail"]


def test_submit_mode_and_finalize_authorization(tmp_path):
    with open_dir() as parent:
        task = Task(
            tmp_path,
            parent,
            reward={"mode": "submit", "targets": [{"split": "test", "key": "reward"}]},
        )
        client = task.client()
        body = client.post("/submit", json={"commit": "main"}).json()
        assert body == {"candidate": "candidate-1", "commit": task.perfect, "time": body["time"]}
        assert client.post("/finalize").status_code == 401
        assert (
            client.post("/finalize", headers={"Authorization": "Bearer wrong"}).status_code == 403
        )
        assert client.post("/finalize", headers={"Authorization": "token x"}).status_code == 401
        token = (task.state / "admin_token").read_text().strip()
        summary = client.post("/finalize", headers={"Authorization": f"Bearer {token}"}).json()
        assert (
            summary["registry"]["submission"]["sha"] == task.perfect
            and summary["reward_mode"] == "submit"
        )
        closed = client.post("/eval", json={"commit": task.perfect, "split": "train"})
        assert closed.status_code == 409 and "finalized" in closed.json()["detail"]


def test_submit_is_refused_in_auto_best_mode(task):
    response = task.client().post("/submit", json={"commit": task.perfect})
    assert response.status_code == 409 and "auto_best" in response.json()["detail"]


def test_token_is_0600_from_creation_and_state_dir_0700(task, monkeypatch):
    calls = []
    real_open, real_chmod = os.open, os.chmod
    monkeypatch.setattr(
        service_module.os,
        "open",
        lambda p, f, m=0o777: calls.append((str(p), f, m)) or real_open(p, f, m),
    )
    monkeypatch.setattr(
        service_module.os,
        "chmod",
        lambda p, m: calls.append((str(p), "chmod", m)) or real_chmod(p, m),
    )
    old = os.umask(0)  # nothing but os.open's own mode may protect it
    try:
        task.client()
    finally:
        os.umask(old)
    token = task.state / "admin_token"
    assert (
        stat.S_IMODE(token.stat().st_mode) == 0o600
        and stat.S_IMODE(task.state.stat().st_mode) == 0o700
    )
    token_calls = [c for c in calls if c[0] == str(token)]
    assert token_calls == [
        (str(token), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    ]  # never chmod-ed
    for name in ("ledger.json", "candidates.json"):
        path = task.state / name
        assert not path.exists() or stat.S_IMODE(path.stat().st_mode) == 0o600


def test_token_with_loose_mode_is_refused(tmp_path):
    path = tmp_path / "token"
    path.write_text("abc\n")
    os.chmod(path, 0o644)
    with pytest.raises(ServiceStateError, match="mode 644"):
        ensure_admin_token(path)


@needs_root
def test_token_unreadable_by_nobody(task):
    with open_dir() as open_parent:
        token_path = (
            open_parent / "admin_token"
        )  # in a world-traversable dir: only the file mode protects it
        task.client(token_path=token_path)
        for path in (token_path, task.state / "admin_token", task.state / "ledger.json"):
            result = subprocess.run(
                ["runuser", "-u", "nobody", "--", "cat", str(path)], capture_output=True, text=True
            )
            assert result.returncode != 0 and "Permission denied" in result.stderr, path


PROBE = """import json, os, sys
targets = sys.argv[1:]
found = {}
for path in targets:
    try:
        open(path).read(); found[path] = "READ"
    except OSError as exc:
        found[path] = type(exc).__name__
info = json.dumps({"uid": os.getuid(), "files": found, "secret": os.environ.get("PTB_TEST_SECRET")})
for line in sys.stdin:
    print(json.dumps({"id": json.loads(line)["id"], "answer": info}))
"""


@needs_root
def test_candidate_cannot_read_token_ledger_or_hidden_data(tmp_path, monkeypatch):
    monkeypatch.setenv("PTB_TEST_SECRET", "s3cret")
    with open_dir() as parent:
        task = Task(tmp_path, parent)
        hidden = parent / "data"  # the task's dataset as a compiler would place it: a root-only dir
        hidden.mkdir(mode=0o700)
        for name in ("train", "dev", "test"):
            (hidden / f"{name}.jsonl").write_text(
                (task.config.dataset / f"{name}.jsonl").read_text()
            )
        task.config = task.config.model_copy(update={"dataset": hidden})
        token_path = parent / "admin_token"
        client = task.client(token_path=token_path)
        client.post(
            "/eval", json={"commit": task.perfect, "split": "train"}
        )  # the ledger exists now
        targets = [
            token_path,
            task.state / "ledger.json",
            task.state / "candidates.json",
            task.state / "dataset" / "train.jsonl",
            hidden / "test.jsonl",
            hidden / "dev.jsonl",
        ]
        task.config.scoring.entry_command = "python3 solve.py " + " ".join(str(t) for t in targets)
        probe = commit(task.repo, {"solve.py": PROBE}, "probe")
        body = client.post("/eval", json={"commit": probe, "split": "train", "limit": 1}).json()
        info = json.loads(body["samples"][0]["prediction"])
        assert (
            info["uid"] in IdentityPool(task.state / "identities.json").issued()
            and info["secret"] is None
        )
        assert info["files"] == {str(t): "PermissionError" for t in targets}
        assert all(t.is_file() for t in targets)  # they exist: the refusals are real


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_module_runs_the_service_over_real_http(task, tmp_path):
    import sys
    import time

    import httpx
    import yaml

    cfg = tmp_path / "task.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                **task.config.model_dump(mode="json"),
                "baseline": str(task.config.baseline),
                "dataset": str(task.config.dataset),
            }
        )
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "posttrainbench.service.api.serve",
            "--config",
            str(cfg),
            "--state-dir",
            str(task.state),
            "--agent-repo",
            str(task.repo),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/status", timeout=2).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    proc.stderr.read() if proc.poll() else ""
                )
                time.sleep(0.2)
        assert status["splits"]["train"]["runs_left"] == 50
        body = httpx.post(
            f"http://127.0.0.1:{port}/eval", json={"commit": "main", "split": "train"}, timeout=30
        ).json()
        assert body["mean"] == 1.0 and body["n"] == 8
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_bad_config_is_one_error_line(tmp_path):
    import sys

    (tmp_path / "bad.yaml").write_text("name: x\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "posttrainbench.service.api.serve",
            "--config",
            str(tmp_path / "bad.yaml"),
            "--state-dir",
            str(tmp_path / "s"),
            "--agent-repo",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        result.returncode == 2
        and result.stderr.startswith("error: ")
        and result.stderr.count("\n") == 1
    )
