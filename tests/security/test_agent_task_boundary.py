"""Agent tasks against a hostile agent and a hostile candidate, in one real trial on the local
sandbox (the compiled GSM8K example, no network).

The agent (``agents/agent_task_hostile.py``) leaves a daemon behind, plants links where root
writes, poisons ``.git`` with links to the hidden labels, opens every channel back to itself
(files in the temp dirs, its repository and home made world-writable, a FIFO, TCP, UDP,
an abstract unix socket, a SysV queue), plants ``posttrainbench``, ``pathspec`` and
``packaging`` shims in its repository for a root Python to import, and commits a candidate
that tries to steal labels, phone home on every one of them, reach the service, and leave a
helper racing the next hand-over and forging the reward. Evaluated on a viewable and an aggregate-only split, then
re-scored by final scoring. The reward must be the baseline's, nothing may come back, and
the integrity audit must find every protected path root's, unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from harbor.models.trial.config import AgentConfig, EnvironmentConfig

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from posttrainbench.host.results.harbor_trial import read_trial
from posttrainbench.service.api.scoring import load_config
from posttrainbench.service.shared.dataset import load_split
from posttrainbench.service.shared.identity import UID_FIRST
from tests.agent_task_e2e_checks import EXAMPLE, check_clean_audit, direct_score, run_job

pytestmark = pytest.mark.slow

LOCAL_SANDBOX = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
HOSTILE = "tests.security.agents.agent_task_hostile:HostileAgentTaskAgent"
# What the agent may do to itself: link inside its own .git, plant files in its own
# repository (shims a root Python would import from there), nothing else of its list.
ROOT_IMPORT_SHIMS = {
    "shim_posttrainbench/__init__.py",
    "shim_pathspec.py",
    "shim_packaging/__init__.py",
}
AGENT_MAY = {"git_shallow", "git_info/grafts", "git_alternates", *ROOT_IMPORT_SHIMS}


@pytest.fixture(scope="module")
def hostile_trial(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    root = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARBOR_TELEMETRY", "0")
        patch.setenv("PTB_CACHE_DIR", str(root / "cache"))
        task = build_agent_task(
            EXAMPLE / "task.yaml", root / "tasks", BuildOptions(network_mode="no-network")
        )
        (trial,) = run_job(
            task,
            root / "jobs",
            [AgentConfig(import_path=HOSTILE)],
            EnvironmentConfig(import_path=LOCAL_SANDBOX),
            job_name="hostile",
        )
    return trial, Path(url2pathname(urlparse(trial.trial_uri).path))


def test_the_reward_is_the_baselines_and_the_audit_is_clean(hostile_trial) -> None:
    trial, trial_dir = hostile_trial
    assert trial.exception_info is None, trial.exception_info
    baseline = direct_score(EXAMPLE / "baseline" / "solve.py", "test")
    assert trial.verifier_result.rewards == {"reward": pytest.approx(baseline)}
    verifier = trial_dir / "verifier"
    final = json.loads((verifier / "final.json").read_text())
    assert final["chosen"] == "baseline" and final["considered"], (
        final
    )  # re-scored, did not beat it
    isolation = check_clean_audit(verifier)
    # The agent's daemon outlived the agent; it was killed, by uid, before anything was scored.
    # No candidate's helper was left to kill: each went with its run.
    killed = isolation["quiesce"][0]["killed"]
    assert killed and all(int(uid) < UID_FIRST for uid in killed), isolation["quiesce"]
    # The results store reads the audit's verdict like any judge's.
    record = read_trial(trial_dir).record
    assert [(v.judge, v.flagged) for v in record.verdicts] == [("isolation", False)]


def test_nothing_came_back_and_nothing_root_owns_was_touched(hostile_trial) -> None:
    _, trial_dir = hostile_trial
    report = json.loads((trial_dir / "agent" / "hostile.json").read_text())
    refused = {name: outcome for name, outcome in report["agent"].items() if name not in AGENT_MAY}
    assert refused and all(outcome != "done" for outcome in refused.values()), refused
    assert report["received"] == {}, report["received"]  # no file, FIFO, socket or queue got a byte
    assert not (trial_dir / "agent" / "forgeries.txt").exists()
    # No root Python (the service at its first /eval, the verifier, the seal check) imported
    # the shims planted in the agent's repository, the directory Harbor starts them in: no
    # marker, and the reward is the baseline's (the test above).
    assert {name: report["agent"][name] for name in ROOT_IMPORT_SHIMS} == dict.fromkeys(
        ROOT_IMPORT_SHIMS, "done"
    )
    assert sorted(trial_dir.rglob("ROOT-IMPORTED-*")) == []
    # Each evaluation ran (the poisoned .git did not stop the fetch) and its candidate stole nothing.
    assert [(e.get("split"), e.get("status")) for e in report["evals"]] == [
        ("train", "ok"),
        ("dev", "ok"),
        ("dev", "ok"),
        ("train", "ok"),
    ], report["evals"]
    assert [e["budget"]["runs_used"] for e in report["evals"]] == [1, 1, 2, 2]
    for viewable in (report["evals"][0], report["evals"][3]):
        line = next(
            x for x in viewable["stderr_tail"].splitlines() if x.startswith("HOSTILE-CANDIDATE ")
        )
        candidate = json.loads(line.removeprefix("HOSTILE-CANDIDATE "))
        assert candidate["labels"] == 0 and candidate["worked"] == ["racer"], candidate
    # The aggregate tier returned the mean and the count only.
    config = load_config(EXAMPLE / "task.yaml")
    dev_ids = {s.id for s in load_split(config.dataset, "dev")}
    for aggregate in (report["evals"][1], report["evals"][2]):
        assert set(aggregate) == {
            "candidate",
            "commit",
            "split",
            "tier",
            "n",
            "mean",
            "status",
            "budget",
        }
        assert not dev_ids & set(json.dumps(aggregate).split('"'))
