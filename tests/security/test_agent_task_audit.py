"""The verifier's last lines of defence, without a trial: the reward seal refuses a reward
changed after final scoring, the output directory is locked before root writes there, and a
deviation the audit finds flags the run in the results store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from posttrainbench.core.agent_task_layout import TaskLayout
from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results.flagged import flagged_runs
from posttrainbench.host.results.harbor_trial import read_trial
from posttrainbench.service.shared.config import CandidateLimits
from posttrainbench.service.shared.identity import IdentityPool
from posttrainbench.service.verifier.audit import Audit
from posttrainbench.service.verifier.reward_seal import check, publish
from posttrainbench.service.verifier.run import HARBOR_LOG, lock_output
from tests.optimize_fixtures import needs_root
from tests.results_fixtures import TrialSpec, write_trial

pytestmark = needs_root


def _published(tmp_path: Path) -> tuple[Path, Path]:
    staging, out, state = tmp_path / "staging", tmp_path / "out", tmp_path / "state"
    for path in (staging, out, state):
        path.mkdir()
    (staging / "final.json").write_text('{"chosen": "baseline"}\n')
    (staging / "reward.json").write_text('{"reward": 0.1}\n')
    publish(staging, out, state)
    return out, state


@pytest.mark.parametrize("tamper", ["rewrite", "symlink", "owner", "mode"])
def test_a_reward_changed_after_final_scoring_is_refused_and_the_run_flagged(
    tmp_path, tamper
) -> None:
    out, state = _published(tmp_path)
    assert check(out, state) is None and not (out / Judgement.filename("isolation")).exists()
    reward = out / "reward.json"
    if tamper == "rewrite":
        reward.write_text('{"reward": 1.0}\n')
    elif tamper == "symlink":
        (tmp_path / "forged.json").write_text('{"reward": 1.0}\n')
        reward.unlink()
        os.symlink(tmp_path / "forged.json", reward)
    elif tamper == "owner":
        os.chown(reward, 65534, 65534)
    else:
        reward.chmod(0o666)
    found = check(out, state)
    assert found
    assert not reward.is_symlink() and json.loads(reward.read_text()) == {"reward": 0.1}
    if tamper == "symlink":  # replaced, never written through
        assert (tmp_path / "forged.json").read_text() == '{"reward": 1.0}\n'
    verdict = Judgement.read(out / Judgement.filename("isolation"))
    assert verdict.flagged and verdict.evidence[-1].detector == "reward_seal"


def test_the_output_directory_is_locked_and_emptied_without_following_links(tmp_path) -> None:
    out = tmp_path / "verifier"
    out.mkdir()
    out.chmod(0o777)
    target = tmp_path / "ledger.json"
    target.write_text("ledger")
    (out / HARBOR_LOG).write_text("harbor's log\n")
    os.symlink(target, out / "reward.json")
    (out / "planted").mkdir()
    os.symlink(tmp_path, out / "planted" / "up")
    lock_output(out)
    assert sorted(os.listdir(out)) == [HARBOR_LOG] and (out.stat().st_mode & 0o777) == 0o755
    assert target.read_text() == "ledger" and (out / HARBOR_LOG).read_text() == "harbor's log\n"


def test_a_deviation_flags_the_run_in_the_results_store(tmp_path) -> None:
    root = tmp_path / "env"
    layout = TaskLayout(
        repo=str(root / "app"),
        service_root=str(root / "svc"),
        runs_root=str(root / "runs"),
        private=str(root / "private"),
        lib=str(root / "lib"),
        venv=str(root / "venv"),
        tests=str(root / "tests"),
        verifier_out=str(root / "out"),
        secrets_dir=str(root / "secrets"),
    )
    for path in (layout.state, layout.private, layout.lib, layout.runs_root, layout.verifier_out):
        Path(path).mkdir(parents=True)
        Path(path).chmod(0o700 if path in (layout.state, layout.private) else 0o755)
    (Path(layout.private) / "task.yaml").write_text("x")
    (Path(layout.private) / "task.yaml").chmod(0o666)  # writable by everyone
    (Path(layout.lib) / "planted.py").write_text("x")
    os.chown(Path(layout.lib) / "planted.py", 65534, 65534)  # not root's
    audit = Audit(
        layout,
        None,
        IdentityPool(Path(layout.state) / "identities.json"),
        CandidateLimits(),
        None,
        None,
    )
    audit.sweep()
    kinds = {(d.kind, Path(d.path).name) for d in audit.report.deviations}
    assert {("mode", "task.yaml"), ("owner", "planted.py")} <= kinds
    trial = write_trial(tmp_path / "jobs" / "job", TrialSpec(judged=False))
    audit.write(trial / "verifier")
    record = read_trial(trial).record
    assert record.flagged is True and [v.judge for v in record.flagging_judges] == ["isolation"]
    (flagged,) = flagged_runs([record], judge="isolation")
    assert "deviation" in flagged.verdicts[0].justification
