"""Which trials of a sweep's Harbor job a resume runs again (the retry policy's reading)."""

from __future__ import annotations

from pathlib import Path


def should_retry(trial_dir: Path) -> bool:
    """A trial whose outcome is retried (posttrainbench.core.trial_outcome.RETRIED_KINDS: an
    infrastructure or verifier failure, or a trial that never finished).

    Completed, no_model and agent_error trials are the agent's own result and stay; an
    unreadable result is left alone too (Harbor itself skips it).
    """
    from posttrainbench.host.results.harbor_trial import TrialReadError, read_outcome

    try:
        return read_outcome(trial_dir).retried
    except TrialReadError:
        return False


def trials_to_retry(job_dir: Path) -> list[Path]:
    """The trials of one Harbor job directory that a resume runs again."""
    if not job_dir.is_dir():
        return []
    return [
        t
        for t in sorted(p for p in job_dir.iterdir() if p.is_dir())
        if (t / "result.json").is_file() and should_retry(t)
    ]
