"""A hostile Mode B candidate in one real trial of the compiled ``examples/agent-task-harbor``
task on the local sandbox (no network).

The scripted optimizer (Harbor's ``oracle``) commits ``agents/mode_b_candidate/agent.py`` in
place of the improved agent and evaluates it on train; final scoring re-scores it. The
candidate answers like the baseline, and, from its own uid behind the proxy, forges nested
result files, reads the service's token and the hidden tasks, lists the nested job's proc
mount, calls the service and leaves a daemon; inside the inner environment it writes a reward
early, leaves a daemon rewriting it during the verifier, looks for the outer sandbox, and
leaves files that would steer the inner verifier: ``/etc/ld.so.preload`` naming a library that
writes the expected answer, and trojan ``cat``, ``chmod`` and ``python3`` first on its PATH.
The optimizer also commits ``posttrainbench``, ``pathspec`` and ``packaging`` shims into the
agent's repository, which root's Python would import were its working directory on its path.
Every forged score would lift it above the baseline, so the baseline must stay chosen and
the hidden split score 0; the audit must find every protected path unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from harbor.models.trial.config import EnvironmentConfig

from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from tests.agent_task_e2e_checks import check_clean_audit, run_job

pytestmark = pytest.mark.slow

LOCAL_SANDBOX = "posttrainbench.host.envs.local_sandbox:LocalSandboxEnvironment"
REPO = Path(__file__).resolve().parents[2]
CANDIDATE = Path(__file__).resolve().parent / "agents" / "mode_b_candidate" / "agent.py"
# Shims a root Python would import from the agent's repository (its working directory): the
# scripted optimizer commits them with the candidate, before the service's first /eval
# imports Harbor (pathspec, packaging) there.
SHIM = Path(__file__).resolve().parent / "agents" / "agent_task_payload" / "root_import_shim.py"
ROOT_IMPORT_SHIMS = ("posttrainbench/__init__.py", "pathspec.py", "packaging/__init__.py")


def _hostile_example(root: Path) -> Path:
    """The Mode B example whose scripted optimizer commits the hostile candidate."""
    task = root / "task"
    shutil.copytree(REPO / "examples" / "agent-task-harbor", task)
    shutil.rmtree(task / "solution")
    (task / "solution").mkdir()
    shutil.copyfile(CANDIDATE, task / "solution" / "agent.py")
    shutil.copyfile(CANDIDATE.with_name("trojan.sh"), task / "solution" / "trojan.sh")
    for rel in ROOT_IMPORT_SHIMS:
        (task / "solution" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHIM, task / "solution" / rel)
    gcc = shutil.which("gcc")
    assert gcc, "gcc builds the candidate's ld.so.preload library (apt-get install gcc)"
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            str(task / "solution" / "forge_preload.so"),
            str(CANDIDATE.with_name("forge_preload.c")),
        ],
        check=True,
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(task)]
    for args in (["init", "--quiet"], ["add", "baseline"], ["commit", "--quiet", "-m", "b"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return task / "task.yaml"


def test_a_forging_mode_b_candidate_keeps_the_baselines_reward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode_b_task_cache: Path
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("PTB_CACHE_DIR", str(mode_b_task_cache))
    task = build_agent_task(
        _hostile_example(tmp_path), tmp_path / "tasks", BuildOptions(network_mode="no-network")
    )
    # The task's instance is kept (delete=False): the nested trials' records are read below.
    (trial,) = run_job(
        task,
        tmp_path / "jobs",
        ["oracle"],
        EnvironmentConfig(import_path=LOCAL_SANDBOX, delete=False),
    )
    assert trial.exception_info is None, trial.exception_info
    trial_dir = Path(url2pathname(urlparse(trial.trial_uri).path))
    # While the agent ran: the candidate's evaluation on train is its honest 0.5.
    optimizer = json.loads((trial_dir / "agent" / "optimizer.json").read_text())
    improved = [e["result"] for e in optimizer["evals"] if e["commit"] == "improved"]
    assert improved and improved[0]["status"] == "ok", improved
    assert {s["id"]: s["score"] for s in improved[0]["samples"]} == {
        "ptb-example/echo-alpha": 1.0,
        "ptb-example/echo-beta": 0.0,
    }
    # Final scoring re-scored it (0.5 again: not above the baseline) and kept the baseline.
    verifier = trial_dir / "verifier"
    final = json.loads((verifier / "final.json").read_text())
    assert final["chosen"] == "baseline" and final["considered"], final
    assert final["considered"][0]["rescored_mean"] == 0.5
    assert trial.verifier_result.rewards == {"reward": 0.0}
    assert json.loads((verifier / "reward.json").read_text()) == {"reward": 0.0}
    check_clean_audit(verifier)
    _check_the_attacks_ran_and_failed(trial_dir)
    # No root Python (the service, its nested jobs, the verifier, the seal check) imported the
    # shims in the agent's repository or the candidate's code (the instance is kept: its
    # rootfs is searched too); the candidate's own host imported them as the real modules.
    assert sorted(trial_dir.rglob("ROOT-IMPORTED-*")) == []


def _check_the_attacks_ran_and_failed(trial_dir: Path) -> None:
    """Every nested trial of the candidate: its attacks ran (the inner daemon was seen running)
    and were refused; its reward is what the inner verifier gave for 'alpha'."""
    nested = list(trial_dir.glob("sandbox/*/rootfs/var/lib/ptb-agent-task/state.nested"))
    assert len(nested) == 1, nested
    results = [
        json.loads(p.read_text()) for p in nested[0].glob("*/*/*/*/jobs/nested/*/result.json")
    ]
    hostile = [r for r in results if r["agent_info"]["name"] == "hostile-echo"]
    # Agent time (train) and final scoring (train again): two nested runs, 2 tasks x 2 attempts.
    assert len(hostile) == 8, [r["agent_info"]["name"] for r in results]
    forged = [p for p in nested[0].glob("*/*/*/*/jobs/nested/*/verifier/forged-by-*")]
    # The preload and the trojans were left in place, and never ran in a verifier.
    assert forged == [], forged
    for result in hostile:
        attacks = result["agent_result"]["metadata"]
        assert attacks["plants"] == {"preload": "done", "trojans": "done"}, attacks["plants"]
        outer = dict(line.split(": ", 1) for line in attacks["outer"])
        assert outer.pop("leave a daemon") == "done"  # allowed; reaped with its uid
        assert all(outcome != "done" for outcome in outer.values()), outer
        inner = attacks["inner"]
        assert inner.pop("daemon") == "running"
        assert set(inner.values()) == {"refused"}, inner
        expected = 1.0 if result["task_name"] == "ptb-example/echo-alpha" else 0.0
        assert result["verifier_result"]["rewards"] == {"reward": expected}, result["task_name"]
