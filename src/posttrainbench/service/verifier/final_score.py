"""Trusted final scoring: choose the final candidate and write ``reward.json`` (always) and
``final.json`` (why this choice).

``auto_best`` re-scores the top-K candidates (ranked by their recorded selection-split
means) on the FULL selection split; the best replaces the baseline only if it STRICTLY
beats the baseline's score there. ``submit`` takes the submitted commit (the baseline when
none). The chosen code is then scored on every reward target split; all runs use the
trusted scorer of the config's mode (A: the service's scorer; B: a nested Harbor run) on
the config's own dataset, each contained like the service's (fresh uid, own directory).
When the chosen candidate cannot be scored on a target (its code cannot be unpacked, it
hit a limit, it timed out), the baseline is scored instead and ``final.json`` says why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import PtbError
from posttrainbench.service.api.scoring import (
    Containment,
    load_config,
    load_samples,
    nested_root,
    score_candidate,
)
from posttrainbench.service.api.summary import ServiceSummary, StatePaths, read_state
from posttrainbench.service.mode_a.scorer import ScoreReport
from posttrainbench.service.shared.candidates import ArchiveSource, baseline_source, git_source
from posttrainbench.service.shared.config import AgentTaskConfig, RewardMode
from posttrainbench.service.shared.identity import IdentityPool
from posttrainbench.service.shared.registry import CandidateRecord, EvaluationRecord
from posttrainbench.service.shared.runas import prepare_runs_root

UNSCORABLE = ("timeout", "limit")  # a chosen candidate ending so is replaced by the baseline


class Considered(BaseModel):
    """One candidate re-scored on the selection split."""

    model_config = ConfigDict(extra="forbid")

    candidate: int
    sha: str
    recorded_mean: float
    recorded_n: int
    rescored_mean: float
    status: str


class TargetScore(BaseModel):
    """The chosen code on one reward target split."""

    model_config = ConfigDict(extra="forbid")

    split: str
    key: str
    n: int
    mean: float
    status: str


class FinalReport(BaseModel):
    """``final.json``."""

    model_config = ConfigDict(extra="forbid")

    task: str
    mode: str
    chosen: str
    chosen_sha: str | None = None
    reason: str
    baseline_selection_mean: float | None = None
    considered: list[Considered] = []
    targets: list[TargetScore] = []
    rewards: dict[str, float]
    error: str | None = None


def rank_candidates(
    summary: ServiceSummary, split: str
) -> list[tuple[CandidateRecord, EvaluationRecord]]:
    """Candidates with their best recorded evaluation on *split*: mean, then samples, then age."""
    best: dict[int, EvaluationRecord] = {}
    for record in summary.registry.evaluations:
        if record.split != split:
            continue
        held = best.get(record.candidate)
        if held is None or (record.mean, record.n) > (held.mean, held.n):
            best[record.candidate] = record
    ranked = sorted(best.values(), key=lambda e: (-e.mean, -e.n, e.candidate))
    return [(summary.registry.candidate(e.candidate), e) for e in ranked]


class _Scoring:
    """Scores code on full splits of the config's dataset, each run contained."""

    def __init__(self, config: AgentTaskConfig, containment: Containment, nested_jobs: Path):
        self.config, self.containment, self.nested_jobs = config, containment, nested_jobs

    def run(self, source: ArchiveSource, split: str, label: str) -> ScoreReport:
        return score_candidate(
            self.config,
            source,
            load_samples(self.config, self.config.dataset, split),
            self.containment,
            dataset_dir=self.config.dataset,
            label=label,
            split=split,
            nested_jobs=self.nested_jobs,
        )


def _choose_auto_best(
    config: AgentTaskConfig,
    summary: ServiceSummary,
    repo: Path,
    scoring: _Scoring,
    baseline: ArchiveSource,
) -> tuple[str, str | None, ArchiveSource, str, float | None, list[Considered]]:
    split = config.reward.selection_split
    assert split is not None  # the config guarantees it in auto_best
    top = rank_candidates(summary, split)[: config.reward.top_k]
    if not top:
        return (
            "baseline",
            None,
            baseline,
            f"no candidate was evaluated on the selection split {split!r}",
            None,
            [],
        )
    baseline_mean = scoring.run(baseline, split, "baseline").mean
    considered: list[Considered] = []
    for record, evaluation in top:
        report = scoring.run(git_source(repo, record.sha), split, f"candidate-{record.id}")
        considered.append(
            Considered(
                candidate=record.id,
                sha=record.sha,
                recorded_mean=evaluation.mean,
                recorded_n=evaluation.n,
                rescored_mean=report.mean,
                status=report.status,
            )
        )
    winner = max(
        considered, key=lambda c: c.rescored_mean
    )  # max keeps the first (best-ranked) on ties
    if winner.rescored_mean > baseline_mean:
        reason = (
            f"candidate-{winner.candidate} scored {winner.rescored_mean:.4f} on the full {split!r} split, "
            f"strictly above the baseline's {baseline_mean:.4f}"
        )
        return (
            f"candidate-{winner.candidate}",
            winner.sha,
            git_source(repo, winner.sha),
            reason,
            baseline_mean,
            considered,
        )
    reason = (
        f"no re-scored candidate strictly beat the baseline's {baseline_mean:.4f} on the full {split!r} split "
        f"(best {winner.rescored_mean:.4f}): the baseline is kept"
    )
    return "baseline", None, baseline, reason, baseline_mean, considered


def _score_targets(
    config: AgentTaskConfig, scoring: _Scoring, source: ArchiveSource, label: str
) -> tuple[list[TargetScore], str | None]:
    """The code of *source* on every target; stops at the first target it cannot be scored on
    (then returns the reason)."""
    targets: list[TargetScore] = []
    for target in config.reward.targets:
        report = scoring.run(source, target.split, label)
        if report.status in UNSCORABLE:
            detail = getattr(report, "reason", None) or report.status
            return (
                targets,
                f"{label} could not be scored on {target.split!r} ({report.status}: {detail})",
            )
        targets.append(
            TargetScore(
                split=target.split,
                key=target.key,
                n=report.n,
                mean=report.mean,
                status=report.status,
            )
        )
    return targets, None


def final_score(
    config: AgentTaskConfig,
    summary: ServiceSummary,
    state_dir: Path,
    out_dir: Path,
    work_dir: Path | None = None,
) -> FinalReport:
    """Choose the final code, score it on the reward targets, write ``reward.json`` and ``final.json``.

    ``reward.json`` is written even when scoring fails (every key 0.0; the error is in
    ``final.json``), and the failure is then raised.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = StatePaths(state_dir)
    # The issued uids are recorded here, even when no service ever ran.
    paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        # Mode B's nested jobs of the final scoring: apart from the agent-time ones (a fresh re-score).
        containment = Containment(IdentityPool(paths.identities), prepare_runs_root(work_dir))
        scoring = _Scoring(config, containment, nested_root(paths.root) / "final")
        baseline = baseline_source(config.baseline)
        baseline_mean: float | None = None
        considered: list[Considered] = []
        if config.reward.mode == RewardMode.AUTO_BEST:
            chosen, sha, source, reason, baseline_mean, considered = _choose_auto_best(
                config, summary, paths.repo, scoring, baseline
            )
        elif summary.registry.submission is not None:
            sub = summary.registry.submission
            chosen, sha, reason = f"candidate-{sub.candidate}", sub.sha, "the agent's submission"
            source = git_source(paths.repo, sub.sha)
        else:
            chosen, sha, source, reason = (
                "baseline",
                None,
                baseline,
                "nothing was submitted: the baseline is scored",
            )
        targets, failure = _score_targets(config, scoring, source, chosen)
        if failure is not None and chosen != "baseline":
            chosen, sha, reason = "baseline", None, f"{failure}: the baseline is scored instead"
            targets, failure = _score_targets(config, scoring, baseline, "baseline")
        if failure is not None:
            raise PtbError(failure)
        result = FinalReport(
            task=config.name,
            mode=config.reward.mode.value,
            chosen=chosen,
            chosen_sha=sha,
            reason=reason,
            baseline_selection_mean=baseline_mean,
            considered=considered,
            targets=targets,
            rewards={t.key: t.mean for t in targets},
        )
    except Exception as exc:
        write_failure(config, out_dir, exc)
        raise
    _write(out_dir, result)
    return result


def write_failure(config: AgentTaskConfig, out_dir: Path, exc: BaseException) -> None:
    """Write a zero ``reward.json`` and a ``final.json`` naming *exc* (the reward file always exists)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(
        out_dir,
        FinalReport(
            task=config.name,
            mode=config.reward.mode.value,
            chosen="none",
            reason="final scoring failed",
            rewards={t.key: 0.0 for t in config.reward.targets},
            error=f"{type(exc).__name__}: {exc}",
        ),
    )


def _write(out_dir: Path, report: FinalReport) -> None:
    write_text_atomic(out_dir / "final.json", report.model_dump_json(indent=2) + "\n")
    write_text_atomic(out_dir / "reward.json", json.dumps(report.rewards, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m posttrainbench.service.verifier.final_score --config C --state-dir S --out-dir D``."""
    parser = argparse.ArgumentParser(
        prog="python -m posttrainbench.service.verifier.final_score", description=__doc__
    )
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument(
        "--state-dir", type=Path, required=True, help="the service's state directory"
    )
    parser.add_argument(
        "--summary", type=Path, default=None, help="a /finalize response (default: read the state)"
    )
    parser.add_argument(
        "--out-dir", type=Path, required=True, help="where reward.json and final.json go"
    )
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="parent of the run directories (root's)"
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except PtbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        try:
            summary = (
                ServiceSummary.model_validate_json(args.summary.read_text(encoding="utf-8"))
                if args.summary
                else read_state(config, args.state_dir)
            )
        except (OSError, ValueError) as exc:
            write_failure(config, args.out_dir, exc)
            raise PtbError(f"cannot read the service's record: {exc}") from None
        report = final_score(config, summary, args.state_dir, args.out_dir, args.work_dir)
    except PtbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(report.rewards))
    return 0


if __name__ == "__main__":
    sys.exit(main())
