"""What state a Harbor trial directory is in, as far as a sweep's retry policy cares."""

from __future__ import annotations

from pathlib import Path


def is_errored(trial_dir: Path) -> bool:
    """A finished trial Harbor recorded an exception for, or that got no reward.

    A trial the verifier scored (even 0, for a missing model) is a result, not an error.
    An unreadable result is left alone (Harbor itself skips it).
    """
    from harbor.models.trial.result import TrialResult

    from posttrainbench.results.harbor_trial import RESULT_FILE, read_harbor_file
    from posttrainbench.safe_fs import SafeDir

    try:
        with SafeDir.open(trial_dir) as root:  # no link followed, no FIFO opened
            parsed = TrialResult.model_validate_json(read_harbor_file(root, RESULT_FILE))
    except (OSError, ValueError):
        return False
    return bool(parsed.recorded_exceptions()) or not (
        parsed.verifier_result and parsed.verifier_result.rewards
    )


def errored_trials(job_dir: Path) -> list[Path]:
    """The errored finished trials of one Harbor job directory."""
    if not job_dir.is_dir():
        return []
    return [
        t
        for t in sorted(p for p in job_dir.iterdir() if p.is_dir())
        if (t / "result.json").is_file() and is_errored(t)
    ]
