"""Arena-Hard v2.0 creative writing: data, verdict parsing, both-order scoring, and
end-to-end judging of real questions with recorded judge replies (no live API)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.arenahard.benchmark import ArenaHardWriting, StaleDataError
from posttrainbench.task.benchmarks.arenahard.judging import (
    SYSTEM_PROMPT,
    USER_TEMPLATE,
    VERDICTS,
    battles,
    candidate_answer,
    judge_messages,
    parse_verdict,
    ptb_metrics,
    question_score,
)
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split
from posttrainbench.task.benchmarks.llm_judge import (
    RECORDING_FORMAT,
    MissingRecordingError,
    recording_key,
)
from tests.data_fixtures import prepared
from tests.judge_fixtures import use_recordings

RECORDINGS = (
    Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "recorded_arenahard_judge.json"
)
RIDDLE, TWISTER = "0bb6a899b9364d9d", "a0a6bb4b819d4a9d"  # real creative-writing question uids

# (question uid, variant) -> (model answer, judge reply with the model as A, reply with the model as B).
# The replies are hand-written stand-ins for gpt-5-mini and are stored in RECORDINGS
# (regenerate with `python -m tests.unit.test_arenahard`).
ANSWERS: dict[tuple[str, str], tuple[str, str, str]] = {
    (RIDDLE, "right"): (
        "Here's a riddle for children:\n\nI have a face and two hands,\nbut no arms and no legs.\n"
        "I tell you when it's time for bed\nand when it's time to play.\n\nWhat am I?\n\n... A clock!",
        "Assistant A writes an original, rhyming riddle with clear clues suited to children; "
        "Assistant B's riddle is a well-known one.\n\nMy final verdict is Assistant A is significantly better: [[A>>B]]",
        "Both riddles are age-appropriate, short and solvable.\n\nMy final verdict is tie: [[A=B]]",
    ),
    (RIDDLE, "wrong"): (
        "Riddles are puzzles that people like to solve.",
        "Assistant A does not write a riddle at all.\n\nMy final verdict is: [[B>>A]]",
        "Assistant A gives a real riddle with an answer, while Assistant B only describes what riddles are.",
    ),
    (TWISTER, "right"): (
        "Six sleek cats sat on six slick sacks, slyly snacking on sixty salty snacks.",
        "A's tongue twister is harder to say quickly and stays on topic.\n\nFinal verdict: [[A>B]]",
        "At first glance one might say [[A>B]] because A is longer, but B's line is the better tongue "
        "twister: tighter alliteration and no filler.\n\nMy final verdict is: [[B>A]]",
    ),
    (TWISTER, "wrong"): (
        "Dogs are loyal animals.",
        "Assistant A ignores the request.\n\nMy final verdict is Assistant B is significantly better: [[B>>A]]",
        "Assistant B ignores the request.\n\nMy final verdict is Assistant A is significantly better: [[A>>B]]",
    ),
}


def recorded_requests(samples: dict[str, Sample]) -> list[tuple[list, str, str]]:
    """(judge messages, reply, note) for every recorded game: game 1 has the baseline as A."""
    out = []
    for (uid, variant), (answer, as_a, as_b) in ANSWERS.items():
        s = samples[uid]
        base = s.data["baseline_answer"]
        out.append(
            (judge_messages(s.data["prompt"], base, answer), as_b, f"{uid} {variant} model as B")
        )
        out.append(
            (judge_messages(s.data["prompt"], answer, base), as_a, f"{uid} {variant} model as A")
        )
    return out


@pytest.fixture(scope="module")
def questions() -> dict[str, Sample]:
    return {s.id: s for s in read_split("arenahardwriting", "test", prepared("arenahardwriting"))}


@pytest.fixture
def recorded_env(monkeypatch):
    use_recordings(monkeypatch, RECORDINGS)


# --- data -------------------------------------------------------------------------------


def test_prepared_data_is_the_creative_writing_category_with_ptb_baselines(questions):
    assert len(questions) == 250
    s = questions[RIDDLE]
    assert s.category == "creative_writing"
    assert s.data["prompt"] == "Write a riddle for children"
    assert s.data["baseline_model"] == "Qwen3-1.7B"
    assert s.data["baseline_answer"].startswith("**Riddle for Children:**")
    assert all(q.data["baseline_answer"].strip() for q in questions.values())


def test_registry_and_prompt(questions):
    bench = get_benchmark("arenahardwriting")
    assert isinstance(bench, ArenaHardWriting) and bench.uses_llm_judge
    assert bench.default_judge_model == "gpt-5-mini"
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens == 1024
    assert bench.build_messages(questions[TWISTER]) == [
        {"role": "user", "content": "Write a tongue twister about cats"}
    ]


def test_stale_data_with_another_baseline_is_a_loud_error(questions):
    s = questions[RIDDLE]
    old = Sample(s.id, s.category, {**s.data, "baseline_model": "gemini-2.0-flash-001"})
    with pytest.raises(StaleDataError, match="--force"):
        ArenaHardWriting().score_batch([old], ["An answer."])


# --- verdict parsing ----------------------------------------------------------------------


@pytest.mark.parametrize("label", ["A>>B", "A>B", "A=B", "B>A", "B>>A"])
def test_parse_each_label(label):
    assert parse_verdict(f"Reasoning...\n\nMy final verdict is: [[{label}]]") == label
    assert parse_verdict(f"final verdict: [[{label.lower()}]]") == label  # case-insensitive


def test_parse_last_label_wins_and_single_brackets_are_a_fallback():
    assert parse_verdict("Maybe [[A>B]]... on reflection [[B>>A]].") == "B>>A"
    assert parse_verdict("Verdict [B>A]") == "B>A"
    assert (
        parse_verdict("[A>B] in passing, then [[A=B]]") == "A=B"
    )  # double brackets take precedence
    assert parse_verdict("<think>[[A>>B]]</think> My final verdict: [[B>A]]") == "B>A"
    assert parse_verdict("[[B<<A]]") == "B<<A"  # the mirrored spellings of the score table


@pytest.mark.parametrize(
    "reply", ["", "Both are fine.", "Verdict: A is better", "[[C>A]]", "[[A]]", "[[AB]]"]
)
def test_parse_no_valid_label(reply):
    assert parse_verdict(reply) is None


# --- both-order scoring -------------------------------------------------------------------


def test_battles_from_the_candidates_side():
    # game 1: baseline is A; game 2: candidate is A (evaluate.py:654-664)
    assert battles("B>A", "A>B") == (1.0, 1.0)
    assert battles("A>>B", "B>>A") == (0.0,) * 6
    assert battles("B>>A", "A=B") == (1.0, 1.0, 1.0, 0.5)
    assert battles(None, "A>B") is None and battles("A>B", None) is None
    assert set(VERDICTS) == {
        "A>>B",
        "A>B",
        "A=B",
        "B>A",
        "B>>A",
        "B<<A",
        "B<A",
        "B=A",
        "A<B",
        "A<<B",
    }


@pytest.mark.parametrize(
    ("game1", "game2", "expected"),
    [
        ("B>A", "A>B", 1.0),  # wins in both seats
        ("A>B", "B>A", 0.0),  # loses in both seats
        ("A>B", "A>B", 0.5),  # position bias: A wins both times -> one win, one loss
        ("A=B", "A=B", 0.5),
        ("A=B", "A>>B", 3.5 / 4),  # strong win weighs 3 games
        ("A>B", "B>>A", 0.0),
        ("B>>A", "B>A", 3 / 4),
        ("A>>B", "A>>B", 0.5),  # strong wins in opposite directions cancel
        ("B>>A", None, 1.0),  # one game: its score (PostTrainBench leaves the question out)
        (None, "B>A", 0.0),
    ],
)
def test_question_score(game1, game2, expected):
    assert question_score(game1, game2) == pytest.approx(expected)


def test_question_score_without_valid_games_is_none():
    assert question_score(None, None) is None


def test_aggregate_pools_the_battles():
    from posttrainbench.task.benchmarks.arenahard.judging import ArenaScore

    results = [
        ArenaScore(1.0, battles=battles("B>>A", "A>>B")),  # 6 wins
        ArenaScore(0.0, battles=battles("A>B", "B>A")),  # 2 losses
        ArenaScore(1.0, "judge_partial"),  # left out
    ]
    got = ptb_metrics(results)
    assert got["accuracy"] == pytest.approx(6 / 8)  # not the mean of question scores (0.5)
    assert got["stderr"] == pytest.approx((0.25 * 0.75 * 8 / 7) ** 0.5 / 8**0.5)


def test_judge_messages_put_answers_in_their_seats():
    msgs = judge_messages("Q?", "first answer", "second answer")
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert msgs[0]["role"] == "system" and system == SYSTEM_PROMPT
    assert user == (
        "<|User Prompt|>\nQ?\n\n<|The Start of Assistant A's Answer|>\nfirst answer\n"
        "<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n"
        "second answer\n<|The End of Assistant B's Answer|>"
    )
    assert USER_TEMPLATE.count("{") == 3
    braces = judge_messages("{QUESTION}", "{ANSWER_B}", "{0}")[1]["content"]  # not re-formatted
    assert (
        "<|User Prompt|>\n{QUESTION}\n" in braces
        and "\n{ANSWER_B}\n<|The End of Assistant A" in braces
    )


def test_candidate_answer_strips_a_leading_think_block_only():
    assert candidate_answer("<think>plan</think>\n\n The poem. ") == "The poem."
    assert candidate_answer("<think>never finished") == "<think>never finished"
    assert candidate_answer("line\n" * 9) == "line\n" * 4 + "line"  # PostTrainBench's limit (5)


# --- end to end with recorded judge replies -----------------------------------------------


def test_score_batch_right_and_wrong_answers(questions, recorded_env):
    bench = ArenaHardWriting()
    samples = [questions[RIDDLE], questions[TWISTER]]
    results = bench.score_batch(
        samples, [ANSWERS[(RIDDLE, "right")][0], ANSWERS[(TWISTER, "wrong")][0]]
    )
    assert [r.score for r in results] == [pytest.approx(0.875), 0.0]
    assert [r.error_type for r in results] == [None, None]
    assert results[0].detail == "model as B: A=B; model as A: A>>B"
    assert results[1].detail == "model as B: A>>B; model as A: B>>A"
    assert bench.aggregate_scores(results)["accuracy"] == pytest.approx(3.5 / 10)


def test_score_batch_unparseable_game_is_left_out_and_reported(questions, recorded_env):
    bench = ArenaHardWriting()
    samples = [questions[RIDDLE], questions[TWISTER]]
    results = bench.score_batch(
        samples, [ANSWERS[(RIDDLE, "wrong")][0], ANSWERS[(TWISTER, "right")][0]]
    )
    assert results[0].score == 0.0 and results[0].error_type == "judge_partial"
    assert "model as B: no verdict label" in results[0].detail and results[0].battles == ()
    # the judge's reply mentions [[A>B]] in passing: its final [[B>A]] counts
    assert results[1].score == 1.0 and results[1].error_type is None
    assert bench.aggregate_scores(results) == {"accuracy": 1.0, "stderr": 0.0}


def test_leading_thinking_is_removed_and_empty_answers_are_judged(questions, recorded_env):
    bench = ArenaHardWriting()
    thought = "<think>Kids like clocks.</think>\n" + ANSWERS[(RIDDLE, "right")][0]
    assert bench.score(questions[RIDDLE], thought).score == pytest.approx(0.875)
    with pytest.raises(MissingRecordingError):  # sent to the judge, as PostTrainBench does
        bench.score(questions[TWISTER], "")


def test_unrecorded_answer_is_a_loud_error(questions, recorded_env):
    with pytest.raises(MissingRecordingError):
        ArenaHardWriting().score_batch([questions[RIDDLE]], ["An answer nobody recorded."])


def _write_recordings() -> None:
    from tests.helpers import REPO  # noqa: F401  (repo on sys.path)

    samples = {
        s.id: s for s in read_split("arenahardwriting", "test", prepared("arenahardwriting"))
    }
    doc = {
        "format": RECORDING_FORMAT,
        "recordings": [
            {
                "key": recording_key("gpt-5-mini", m),
                "model": "gpt-5-mini",
                "note": note,
                "response": r,
            }
            for m, r, note in recorded_requests(samples)
            if r
        ],
    }
    RECORDINGS.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    _write_recordings()


def test_litellm_judge_sends_posttrainbenchs_settings_and_drops_a_rejected_effort(monkeypatch):
    from posttrainbench.task.benchmarks import llm_judge

    class BadRequestError(Exception):
        pass

    calls = []

    def completion(**kw):
        calls.append(kw)
        if "reasoning_effort" in kw and kw["model"] == "gpt-4.1":
            raise BadRequestError("gpt-4.1 does not support parameters: ['reasoning_effort']")
        return SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content="[[A=B]]"))]
        )

    fake = SimpleNamespace(
        completion=completion,
        validate_environment=lambda model: {"keys_in_environment": True, "missing_keys": []},
        BadRequestError=BadRequestError,
    )
    monkeypatch.setattr(llm_judge, "_import_litellm", lambda: fake)
    for model in ("gpt-5-mini", "gpt-4.1"):
        judge = llm_judge.LitellmJudge(model)
        assert judge.complete([], temperature=None, max_tokens=49152, reasoning_effort="medium")
    assert calls[0] == {
        "model": "gpt-5-mini",
        "messages": [],
        "temperature": None,  # litellm sends no temperature
        "max_tokens": 49152,
        "reasoning_effort": "medium",
    }
    assert "reasoning_effort" in calls[1] and "reasoning_effort" not in calls[2]
    assert len(calls) == 3
