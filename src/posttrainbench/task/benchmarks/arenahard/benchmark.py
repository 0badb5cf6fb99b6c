"""Arena-Hard v2.0 creative writing as a sandbox :class:`Benchmark`, scored as PostTrainBench does.

The model's answers are compared with Qwen3-1.7B's (PostTrainBench's baseline for the
category) by ``gpt-5-mini`` (PostTrainBench's ``JUDGE_MODEL``; override with
``PTB_JUDGE_MODEL``) in both orders; the score is PostTrainBench's win rate over the
pooled weighted games (:func:`.judging.ptb_metrics`, :meth:`ArenaHardWriting.aggregate_scores`).
See :mod:`.judging` for the semantics and their sources, :mod:`.source` for the data.

The judge request is PostTrainBench's ``call_openai`` (evaluate.py:412-443 at
9082063a62e10e040f1acacdec2ccfc1467e0c00): no temperature (the provider's default),
``max_completion_tokens`` 49152, ``reasoning_effort`` "medium" (dropped for a model that
rejects it). The config file's ``temperature: 0.0`` / ``max_tokens: 16000`` are not what
PostTrainBench sends: its evaluate.py reads only the prompt template and the patterns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from ..judge_guard import InjectionFinding, finding_labels
from ..judged import JudgedBenchmark
from ..llm_judge import parallel_map, raise_systemic
from .judging import (
    INJECTED_BATTLES,
    ArenaScore,
    battles,
    candidate_answer,
    game_messages,
    injection_in,
    parse_verdict,
    ptb_metrics,
    question_score,
)
from .source import BASELINE_MODEL

DEFAULT_JUDGE = "gpt-5-mini"  # evaluate.py:42 JUDGE_MODEL; override with PTB_JUDGE_MODEL
JUDGE_TEMPERATURE: float | None = None  # evaluate.py sends none
JUDGE_MAX_TOKENS = 49152  # evaluate.py:45 JUDGE_MAX_COMPLETION (max_completion_tokens)
JUDGE_REASONING_EFFORT = "medium"  # evaluate.py:43 REASONING_EFFORT
GAMES = ("model as B", "model as A")  # game 1: baseline is A; game 2: swapped


class StaleDataError(RuntimeError):
    """The prepared data pairs the questions with another baseline than PostTrainBench's."""


class ArenaHardWriting(JudgedBenchmark):
    """250 creative-writing prompts; score = win rate vs Qwen3-1.7B's answers."""

    id = "arenahardwriting"
    name = "Arena-Hard v2.0 creative writing"
    # Our own (non-PostTrainBench) variant's cap: greedy, 1024 new tokens, so a small
    # model's runaway generation does not dominate a CPU run. PostTrainBench generates up
    # to 16384 (evaluate.py:704); its variant's cap comes from plugin.json.
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)
    default_judge_model = DEFAULT_JUDGE

    def build_messages(self, sample: Sample) -> list[Message]:
        return [{"role": "user", "content": sample.data["prompt"]}]  # evaluate.py:339-341

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["prompt"])

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        return self.score_batch([sample], [completion])[0]

    def aggregate_scores(self, results: Sequence[ScoreResult]) -> dict[str, float]:
        """PostTrainBench's accuracy and stderr over the pooled battles of *results*."""
        return ptb_metrics(results)

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        """Judge every answer in both orders, all games in parallel.

        An answer carrying judge-directed content loses both games without a judge call.
        """
        for s in samples:
            if s.data.get("baseline_model", BASELINE_MODEL) != BASELINE_MODEL:
                raise StaleDataError(
                    f"arenahardwriting data pairs {s.id} with {s.data.get('baseline_model')!r}, "
                    f"not {BASELINE_MODEL}: prepared by an older version, run "
                    "`ptb data prepare -b arenahardwriting --force`"
                )
        answers = [candidate_answer(c) for c in completions]
        injected = {i: injection_in(a) for i, a in enumerate(answers)}
        requests = {
            i: game_messages(samples[i].data["prompt"], samples[i].data["baseline_answer"], a)
            for i, a in enumerate(answers)
            if not injected[i]
        }
        games = [(i, g) for i in requests for g in (0, 1)]
        judge = self.judge() if games else None

        def play(game: tuple[int, int]) -> str:
            i, g = game
            assert judge is not None
            return judge.complete(
                requests[i][g],
                temperature=JUDGE_TEMPERATURE,
                max_tokens=JUDGE_MAX_TOKENS,
                reasoning_effort=JUDGE_REASONING_EFFORT,
            )

        replies = parallel_map(play, games)
        raise_systemic(replies)
        labels: dict[int, list[str | None]] = {i: [None, None] for i in requests}
        notes: dict[int, list[str]] = {i: ["", ""] for i in requests}
        for (i, g), reply in zip(games, replies):
            if isinstance(reply, BaseException):
                notes[i][g] = f"judge error: {type(reply).__name__}: {reply}"
            else:
                labels[i][g] = parse_verdict(reply, answers[i])
                notes[i][g] = labels[i][g] or "no verdict label"
        return [
            _injected(injected[i]) if injected[i] else _result(labels[i], notes[i])
            for i in range(len(samples))
        ]


def _injected(findings: list[InjectionFinding]) -> ScoreResult:
    """A loss for an answer that addresses the judge, with what it carried."""
    evidence = "; ".join(f"{f.kind}: {f.evidence!r}" for f in findings)
    return ArenaScore(
        0.0,
        "judge_injection",
        f"not judged, counted as a strong loss in both games: {evidence}",
        finding_labels(findings),
        battles=INJECTED_BATTLES,
    )


def _result(labels: list[str | None], notes: list[str]) -> ScoreResult:
    """The result of one question from its two games' labels."""
    detail = "; ".join(f"{seat}: {note}" for seat, note in zip(GAMES, notes))
    both = battles(labels[0], labels[1])
    if both is not None:
        return ArenaScore(sum(both) / len(both), None, detail, battles=both)
    score = question_score(labels[0], labels[1])
    if score is None:
        return ArenaScore(0.0, "judge_unparseable", detail)
    # PostTrainBench leaves the question out of its pool; the score shown is the one game's.
    return ArenaScore(score, "judge_partial", detail)
