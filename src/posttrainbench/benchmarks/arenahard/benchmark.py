"""Arena-Hard v2.0 creative writing as a sandbox :class:`Benchmark`.

The headline score is the model's win rate against the baseline answers
(gemini-2.0-flash-001), judged by an LLM in both orders; see :mod:`.judging`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import ContaminationText, GenerationSettings, Message, Sample, ScoreResult
from ..judge_guard import InjectionFinding, finding_labels
from ..judged import JudgedBenchmark
from ..llm_judge import parallel_map, raise_systemic, strip_thinking
from .judging import Game, injection_in, judge_messages, parse_verdict, question_score

DEFAULT_JUDGE = "gpt-4.1"  # Arena-Hard v2.0's judge; override with PTB_JUDGE_MODEL
JUDGE_TEMPERATURE = 0.0  # Arena-Hard v2.0 judges greedily
JUDGE_MAX_TOKENS = 16000  # Arena-Hard v2.0's judge budget (a cap, replies are shorter)


class ArenaHardWriting(JudgedBenchmark):
    """250 creative-writing prompts; score = win rate vs the baseline answers."""

    id = "arenahardwriting"
    name = "Arena-Hard v2.0 creative writing"
    # Greedy, 1024 new tokens: enough for the essays/poems asked for, and bounded so a
    # small model's runaway generation does not dominate evaluation time.
    generation = GenerationSettings(max_new_tokens=1024, temperature=0.0)
    default_judge_model = DEFAULT_JUDGE

    def build_messages(self, sample: Sample) -> list[Message]:
        return [{"role": "user", "content": sample.data["prompt"]}]

    def contamination_text(self, data: dict[str, Any]) -> ContaminationText:
        """The question (and answer) a contaminated training file would contain."""
        return ContaminationText(question=data["prompt"])

    def score(self, sample: Sample, completion: str) -> ScoreResult:
        return self.score_batch([sample], [completion])[0]

    def score_batch(
        self, samples: Sequence[Sample], completions: Sequence[str]
    ) -> list[ScoreResult]:
        """Judge every answer in both orders, all games in parallel.

        An empty answer, or one carrying judge-directed content, loses without a judge call.
        """
        answers = [strip_thinking(c) for c in completions]
        injected = {i: injection_in(a) for i, a in enumerate(answers)}
        games = [
            (i, model_is_a)
            for i, a in enumerate(answers)
            if a and not injected[i]
            for model_is_a in (True, False)
        ]
        judge = self.judge() if games else None

        def play(game: tuple[int, bool]) -> str:
            i, model_is_a = game
            s = samples[i]
            a, b = (
                (answers[i], s.data["baseline_answer"])
                if model_is_a
                else (s.data["baseline_answer"], answers[i])
            )
            assert judge is not None
            return judge.complete(
                judge_messages(s.data["prompt"], a, b),
                temperature=JUDGE_TEMPERATURE,
                max_tokens=JUDGE_MAX_TOKENS,
            )

        replies = parallel_map(play, games)
        raise_systemic(replies)
        played: dict[int, list[tuple[Game, str]]] = {}
        for (i, model_is_a), reply in zip(games, replies):
            if isinstance(reply, BaseException):
                game, note = Game(model_is_a, None), f"judge error: {type(reply).__name__}: {reply}"
            else:
                label = parse_verdict(reply, answers[i])
                game, note = Game(model_is_a, label), label or "no verdict label"
            played.setdefault(i, []).append((game, note))
        return [
            _injected(injected[i]) if injected[i] else _result(played.get(i, []))
            for i in range(len(samples))
        ]


def _injected(findings: list[InjectionFinding]) -> ScoreResult:
    """A loss for an answer that addresses the judge, with what it carried."""
    evidence = "; ".join(f"{f.kind}: {f.evidence!r}" for f in findings)
    return ScoreResult(
        0.0,
        "judge_injection",
        f"not judged, counted as a loss: {evidence}",
        finding_labels(findings),
    )


def _result(games: list[tuple[Game, str]]) -> ScoreResult:
    """The ScoreResult of one question from its judged games."""
    if not games:
        return ScoreResult(0.0, "empty_answer", "empty answer: counted as a loss")
    detail = "; ".join(f"model as {'A' if g.model_is_a else 'B'}: {note}" for g, note in games)
    score = question_score([g for g, _ in games])
    dropped = sum(not g.valid for g, _ in games)
    if score is None:
        return ScoreResult(0.0, "judge_unparseable", detail)
    return ScoreResult(score, "judge_partial" if dropped else None, detail)
