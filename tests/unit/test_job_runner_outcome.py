"""`ptb run`'s run.json says each trial's outcome kind, as the results store does (issue 19:
a trial that left no model was `completed` there)."""

from __future__ import annotations

from pathlib import Path

from harbor.models.trial.result import TrialResult

from posttrainbench.host.runner.job_runner import _trial_record
from posttrainbench.host.runner.record import run_status
from tests.results_fixtures import TrialSpec, write_trial


def _record(tmp_path: Path, spec: TrialSpec):
    trial = write_trial(tmp_path / "job", spec)
    return _trial_record(TrialResult.model_validate_json((trial / "result.json").read_text()))


def test_trial_records_carry_the_outcome_kind_and_reason(tmp_path: Path) -> None:
    scored = _record(tmp_path, TrialSpec(score=0.5))
    assert (scored.outcome, scored.reward, scored.error) == ("completed", 0.5, None)
    assert scored.metrics_path and scored.metrics_path.endswith("verifier/metrics.json")
    nothing = _record(tmp_path, TrialSpec(verifier_error="final model not found at /x"))
    assert (nothing.outcome, nothing.reward, nothing.error) == (
        "no_model",
        0.0,
        "final model not found at /x",
    )
    broken = _record(tmp_path, TrialSpec(error="EnvironmentStartTimeoutError", score=None))
    assert broken.outcome == "infra_error" and broken.error.startswith("EnvironmentStart")
    assert run_status(["no_model"]) == "no_model"
    assert run_status(["completed", "completed"]) == "completed"
    assert run_status(["completed", "infra_error"]) == "mixed"
