"""Per judge: how much its LLM votes agreed (`--llm-votes N` with N >= 2)."""

from __future__ import annotations

from collections import defaultdict

from posttrainbench.core.verdict import Judgement
from posttrainbench.host.results.record import ResultRecord
from posttrainbench.host.results.table import JudgeAgreement


def judge_agreement(records: list[ResultRecord]) -> list[JudgeAgreement]:
    """One row per judge with at least one multi-vote verdict, in judge order."""
    by_judge: dict[str, list[tuple[str, Judgement]]] = defaultdict(list)
    for record in records:
        for verdict in record.verdicts:
            if verdict.vote_agreement is not None:
                by_judge[verdict.judge].append((record.id, verdict))
    rows = []
    for judge, verdicts in sorted(by_judge.items()):
        agreements = [v.vote_agreement or 0.0 for _, v in verdicts]
        rows.append(
            JudgeAgreement(
                judge=judge,
                n_verdicts=len(verdicts),
                n_votes=sum(len(v.llm_votes) for _, v in verdicts),
                mean_agreement=sum(agreements) / len(agreements),
                low_agreement=[run_id for run_id, v in verdicts if v.low_agreement],
            )
        )
    return rows
