"""What state a Harbor trial directory is in, as far as a sweep's retry policy cares."""

from __future__ import annotations

from pathlib import Path


def is_errored(trial_dir: Path) -> bool:
    """A finished trial Harbor recorded an exception for, or that got no reward.

    A trial the verifier scored (even 0, for a missing model) is a result, not an error.
    An unreadable result is left alone (Harbor itself skips it).
    """
    from harbor.models.trial.result import TrialResult

    try:
        parsed = TrialResult.model_validate_json((trial_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(parsed.recorded_exceptions()) or not (parsed.verifier_result and parsed.verifier_result.rewards)


def errored_trials(job_dir: Path) -> list[Path]:
    """The errored finished trials of one Harbor job directory."""
    if not job_dir.is_dir():
        return []
    return [t for t in sorted(p for p in job_dir.iterdir() if p.is_dir())
            if (t / "result.json").is_file() and is_errored(t)]
