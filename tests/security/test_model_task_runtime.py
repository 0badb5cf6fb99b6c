"""Issue 15's runtime attacks on model tasks, by a hostile agent in real Harbor trials on
the local sandbox (bfcl x smollm2-135m, one test item, a 3-minute verifier; the judges'
own attacks are in their own tier).

One trial runs every runtime attack (``agents/model_task_runtime_attacks.sh``, killing
the system monitor and forging its log among them) through the re-prompting wrapper, whose
host-side log is one of the targets; a second runs the resource attacks (a 1 TiB sparse final_model, a 1 GiB sparse log, a FIFO). Each
assertion names the invariant it checks; docs/security.md (section model-tasks) lists
them with the defence that holds each.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from posttrainbench.host.agents.reprompt_policy import read_records
from posttrainbench.host.envs.host_addresses import HOST_ALLOW_ENV, format_allowance
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.sandbox.handoff import Handoff
from posttrainbench.task.schemas import Metrics
from tests.helpers import run_ptb
from tests.security.agents.model_task_hostile import REPORT_FILE, parse_report
from tests.security.host_canaries import CanaryServer, outside_address, touched_files, watch_files
from tests.security.planting import Canary, files_containing, links_under, make_canary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("slirp4netns") is None,
        reason="needs bubblewrap and slirp4netns (scripts/setup.sh)",
    ),
]

ENV = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
WRAPPER = "posttrainbench.host.agents.reprompt:RepromptingAgent"
HOSTILE = "tests.security.agents.model_task_hostile:HostileModelAgent"
HOURS = 0.01  # a 36-second agent timeout
HOST_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN")
CLI_TIMEOUT = 120


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A 3-minute verifier: its first attempt gets about 70 s, room for one item of each
    # model on a loaded CI machine (at 2 minutes, 41 s was once too few there).
    options = CompileOptions(
        hours=HOURS,
        cpus=2,
        memory_gb=8,
        final_eval_limit=1,
        score_base_model=True,
        verifier_timeout_min=3,
    )
    return compile_task("bfcl", "smollm2-135m", tmp_path_factory.mktemp("tasks"), options)


def _run_trial(task: Path, jobs: Path, agent_kwargs: dict) -> Path:
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    config = JobConfig(
        job_name="hostile",
        jobs_dir=jobs,
        n_concurrent_trials=1,
        quiet=True,
        agents=[
            AgentConfig(
                import_path=WRAPPER, kwargs={"inner": HOSTILE, "max_reprompts": 0, **agent_kwargs}
            )
        ],
        tasks=[TaskConfig(path=task)],
        environment=EnvironmentConfig(import_path=ENV),
    )

    async def run() -> object:
        return await (await Job.create(config)).run()

    (trial,) = asyncio.run(run()).trial_results  # type: ignore[attr-defined]
    return Path(trial.trial_uri.removeprefix("file://"))


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_runtime_attacks_reach_nothing_of_the_host_and_end_at_the_deadline(
    task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    canary: Canary = make_canary(tmp_path / "host")
    canary_files = [canary.file, canary.dir / "config.json"]
    secrets = {key: f"{canary.text}-{key}" for key in HOST_KEYS}
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    loopback = CanaryServer("127.0.0.1")
    outside_host = outside_address()
    outside = CanaryServer(outside_host) if outside_host else None
    if outside_host and outside:
        # The positive control: one explicitly allowed port of the host (every other port and
        # address of it is blocked: tests/security/test_sandbox_host_addresses.py).
        monkeypatch.setenv(HOST_ALLOW_ENV, format_allowance(outside_host, outside.port))
    abstract_name = f"ptb-security-canary-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(4)
    abstract.settimeout(0.1)
    state = watch_files(canary_files)
    try:
        trial = _run_trial(
            task,
            tmp_path / "jobs",
            {
                "attack": "runtime",
                "canary_file": str(canary.file),
                "canary_dir": str(canary.dir),
                "loopback_port": loopback.port,
                "outside_host": outside_host or "",
                "outside_port": outside.port if outside else 0,
                "abstract_name": abstract_name,
            },
        )
        try:
            abstract.accept()
            abstract_hit = True
        except OSError:
            abstract_hit = False
    finally:
        loopback.close()
        if outside:
            outside.close()
        abstract.close()

    report = parse_report((trial / "agent" / REPORT_FILE).read_text())
    result = json.loads((trial / "result.json").read_text())
    assert report.get("done") == "yes" and report["whoami"] == "agent" and report["uid"] != "0", (
        report
    )
    # The agent is not root: every trusted file stayed root's, unwritable.
    tampered = {
        key: value for key, value in report.items() if key.startswith(("wrote:", "created:"))
    }
    assert tampered and set(tampered.values()) == {"no"}, tampered
    assert report["stamp_kept"] == "yes"
    # No host network: not the loopback (directly or by slirp's gateway), not an abstract socket.
    assert report["net_loopback"] != "open" and report["net_gateway"] != "open", report
    assert report["net_abstract"] != "open" and not abstract_hit
    assert loopback.received == []
    if outside:  # ... while the network works (here: the host's one allowed port)
        assert report["net_outside"] == "open" and outside.received, report
    # No host secret and no host file anywhere in the trial (the agent dumped all it could read).
    assert report["read_canary"] == "no"
    assert files_containing(trial, canary.text) == []
    assert touched_files(state) == [], "a host canary file was read or written"
    # No planted link reached the host: the trial dir holds no link at all.
    assert links_under(trial) == []
    # The re-prompting wrapper's host-side log is its own, not a link and not the agent's file.
    assert [r.round for r in read_records(trial / "agent" / "reprompt.jsonl")] == [1]
    # The collect hook ran as root with its own code: the shadowing package in /app did nothing.
    artifacts = trial / "artifacts" / "logs" / "artifacts"
    _check_the_monitor_outlived_the_attack(report, artifacts)
    assert not (artifacts / "ROOT-HIJACKED").exists()
    handoff = Handoff.read(artifacts)
    assert handoff is not None and handoff.status == "collected" and handoff.agent_survivors == 0, (
        handoff
    )
    assert handoff.size is not None and {"leak.json", "hostdir"} <= set(handoff.size.removed)
    # The deadline is hard: the writers were alive before it and wrote nothing after it.
    ended = _epoch(result["agent_execution"]["finished_at"])
    ticks = [
        float(line.split()[1])
        for line in (artifacts / "final_model" / "notes.txt").read_text().splitlines()
    ]
    assert ticks and int(report["writers"]) >= 3, report
    late = [t for t in ticks if t > ended]
    assert late == [], f"{len(late)} writes into final_model after the agent's deadline"
    by_path = (artifacts / "final_model" / "late-by-path.txt").read_text().split()
    assert len(by_path) == 2, f"the by-path writer's file holds {by_path!r}, not one tick"
    assert float(by_path[1]) <= ended, (
        "a file was written into final_model after the agent's deadline"
    )
    # What was scored is the base model: the reward equals the base model's own score.
    metrics = Metrics.load(trial / "verifier" / "metrics.json")
    assert metrics.error is None and metrics.base_model is not None, metrics
    assert (
        result["verifier_result"]["rewards"]["reward"]
        == metrics.accuracy
        == metrics.base_model.accuracy
    )

    # The host's readers on this trial: nothing of the host in what they write or print.
    results = tmp_path / "results"
    exported = run_ptb(
        "results",
        "export",
        str(tmp_path / "jobs"),
        "-o",
        str(results),
        "--with-final-model",
        timeout=CLI_TIMEOUT,
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    reported = run_ptb(
        "report", str(results), "-o", str(tmp_path / "report.html"), timeout=CLI_TIMEOUT
    )
    assert reported.returncode == 0, reported.stderr
    shown = run_ptb("traces", "show", str(trial), timeout=CLI_TIMEOUT)
    for output in (
        exported.stdout + exported.stderr,
        reported.stdout + reported.stderr,
        (tmp_path / "report.html").read_text(),
        shown.stdout + shown.stderr,
    ):
        assert canary.text not in output
    assert files_containing(results, canary.text) == [] and links_under(results) == []
    assert touched_files(state) == []


def _check_the_monitor_outlived_the_attack(report: dict[str, str], artifacts: Path) -> None:
    """The monitor is root's and logs where the agent cannot write: the agent's kills missed
    it (it took its last sample after the agent, at the collect hook) and no forged line is
    in its log; the agent's own /logs/agent/system_monitor.log is just one of its files."""
    assert report["monitor_appended"] == "no" and report["monitor_replaced"] == "no", report
    log = (artifacts / "system_monitor.log").read_text()
    assert "FORGED" not in log
    samples = [line for line in log.splitlines() if line.startswith("=== ")]
    assert len(samples) >= 2 and samples[-1].endswith(" (after the agent)"), samples
    assert _epoch(samples[-1].split()[1]) >= int(report["monitor_attacked_at"]), samples


def test_resource_attacks_are_capped_with_a_reason(
    task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    trial = _run_trial(task, tmp_path / "jobs", {"attack": "resources", "wait_for_deadline": False})
    report = parse_report((trial / "agent" / REPORT_FILE).read_text())
    assert report.get("done") == "yes" and int(report["final_model_apparent"]) >= 2**40, report
    # final_model over the cap (by its apparent size; it takes no disk) is not scored, with the reason.
    metrics = Metrics.load(trial / "verifier" / "metrics.json")
    assert metrics.accuracy == 0.0 and metrics.n == 0
    assert (metrics.error or "").startswith("final_model rejected by the collect hook:"), (
        metrics.error
    )
    assert "over the cap" in metrics.error
    artifacts = trial / "artifacts" / "logs" / "artifacts"
    assert not (artifacts / "final_model").exists()
    # The sparse log and the FIFO never became host files; the download says what it refused.
    assert not os.path.lexists(trial / "agent" / "huge.jsonl") and not os.path.lexists(
        trial / "agent" / "pipe.jsonl"
    )
    refused = json.loads((trial / "agent" / "ptb_transfer_refused.json").read_text())["refused"]
    assert any("huge.jsonl" in line for line in refused) and any(
        "pipe.jsonl" in line for line in refused
    )
    on_disk = (
        sum(os.lstat(Path(d) / n).st_blocks for d, _, files in os.walk(trial) for n in files) * 512
    )
    assert on_disk < 64 * 2**20, f"the trial dir takes {on_disk} bytes"
