"""Arena-Hard v2.0 creative writing: data, verdict parsing, both-order scoring, and
end-to-end judging of real questions with recorded judge replies (no live API)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posttrainbench.benchmarks import get_benchmark
from posttrainbench.benchmarks.arenahard.benchmark import ArenaHardWriting
from posttrainbench.benchmarks.arenahard.judging import (
    SYSTEM_PROMPT,
    VERDICTS,
    Game,
    judge_messages,
    parse_verdict,
    question_score,
)
from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.datafiles import read_split
from posttrainbench.benchmarks.llm_judge import MissingRecordingError
from tests.data_fixtures import prepared
from tests.judge_fixtures import use_recordings

RECORDINGS = (
    Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "recorded_arenahard_judge.json"
)
RIDDLE, TWISTER = "0bb6a899b9364d9d", "a0a6bb4b819d4a9d"  # real creative-writing question uids

# (question uid, variant) -> (model answer, judge reply with the model as A, reply with the model as B).
# The replies are hand-written stand-ins for gpt-4.1 and are stored in RECORDINGS.
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


@pytest.fixture(scope="module")
def questions() -> dict[str, Sample]:
    return {s.id: s for s in read_split("arenahardwriting", "test", prepared("arenahardwriting"))}


@pytest.fixture
def recorded_env(monkeypatch):
    use_recordings(monkeypatch, RECORDINGS)


# --- data -------------------------------------------------------------------------------


def test_prepared_data_is_the_creative_writing_category_with_baselines(questions):
    assert len(questions) == 250
    s = questions[RIDDLE]
    assert s.category == "creative_writing"
    assert s.data["prompt"] == "Write a riddle for children"
    assert s.data["baseline_model"] == "gemini-2.0-flash-001"
    assert "A map" in s.data["baseline_answer"]
    assert all(q.data["baseline_answer"].strip() for q in questions.values())


def test_registry_and_prompt(questions):
    bench = get_benchmark("arenahardwriting")
    assert isinstance(bench, ArenaHardWriting) and bench.uses_llm_judge
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens == 1024
    assert bench.build_messages(questions[TWISTER]) == [
        {"role": "user", "content": "Write a tongue twister about cats"}
    ]


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


@pytest.mark.parametrize(
    "reply", ["", "Both are fine.", "Verdict: A is better", "[[C>A]]", "[[A]]", "[[AB]]"]
)
def test_parse_no_valid_label(reply):
    assert parse_verdict(reply) is None


# --- both-order aggregation ---------------------------------------------------------------


def test_game_scores_from_the_models_seat():
    assert Game(True, "A>B").model_score() == (1.0, 1)
    assert Game(False, "A>B").model_score() == (0.0, 1)
    assert Game(True, "B>>A").model_score() == (0.0, 3)
    assert Game(False, "B>>A").model_score() == (1.0, 3)
    assert Game(True, "A=B").model_score() == Game(False, "A=B").model_score() == (0.5, 1)
    assert set(VERDICTS) >= {"A>>B", "A>B", "A=B", "B>A", "B>>A"}


@pytest.mark.parametrize(
    ("as_a", "as_b", "expected"),
    [
        ("A>B", "B>A", 1.0),  # wins in both seats
        ("B>A", "A>B", 0.0),  # loses in both seats
        ("A>B", "A>B", 0.5),  # position bias: A wins both times -> one win, one loss
        ("A=B", "A=B", 0.5),
        ("A>>B", "A=B", 3.5 / 4),  # strong win weighs 3 games
        ("B>>A", "B>A", 1 / 4),  # strong loss (3 x 0) + slight win (1)
        ("A>>B", "A>>B", 0.5),  # strong wins in opposite directions cancel
        ("A>>B", None, 1.0),  # the unparseable game is dropped
        (None, "A>B", 0.0),
    ],
)
def test_question_score(as_a, as_b, expected):
    assert question_score([Game(True, as_a), Game(False, as_b)]) == pytest.approx(expected)


def test_question_score_without_valid_games_is_none():
    assert question_score([Game(True, None), Game(False, None)]) is None
    assert question_score([]) is None


def test_judge_messages_put_answers_in_their_seats():
    msgs = judge_messages("Q?", "first answer", "second answer")
    system, user = msgs[0]["content"], msgs[1]["content"]
    assert msgs[0]["role"] == "system" and system.startswith(SYSTEM_PROMPT)
    code = re.search(r"carry the code \[([0-9a-f]{24})\]", system).group(1)
    assert user.startswith("<|User Prompt|>\nQ?\n\n")
    assert (
        user.index("first answer")
        < user.index(f"<|The End of Assistant A's Answer|> [{code}]")
        < user.index("second answer")
        < user.index(f"<|The End of Assistant B's Answer|> [{code}]")
    )
    assert (
        judge_messages("Q?", "first answer", "second answer") == msgs
    )  # deterministic: recordings match
    braces = judge_messages("{question}", "{answer_b}", "{0}")[1][
        "content"
    ]  # texts are not re-formatted
    assert (
        "<|User Prompt|>\n{question}\n" in braces
        and "\n{answer_b}\n<|The End of Assistant A" in braces
    )


# --- end to end with recorded judge replies -----------------------------------------------


def test_score_batch_right_and_wrong_answers(questions, recorded_env):
    bench = ArenaHardWriting()
    samples = [questions[RIDDLE], questions[TWISTER]]
    results = bench.score_batch(
        samples, [ANSWERS[(RIDDLE, "right")][0], ANSWERS[(TWISTER, "wrong")][0]]
    )
    assert [r.score for r in results] == [pytest.approx(0.875), 0.0]
    assert [r.error_type for r in results] == [None, None]
    assert results[0].detail == "model as A: A>>B; model as B: A=B"
    assert results[1].detail == "model as A: B>>A; model as B: A>>B"


def test_score_batch_unparseable_game_is_dropped_and_reported(questions, recorded_env):
    bench = ArenaHardWriting()
    samples = [questions[RIDDLE], questions[TWISTER]]
    results = bench.score_batch(
        samples, [ANSWERS[(RIDDLE, "wrong")][0], ANSWERS[(TWISTER, "right")][0]]
    )
    assert results[0].score == 0.0 and results[0].error_type == "judge_partial"
    assert "model as B: no verdict label" in results[0].detail
    # the judge's second reply mentions [[A>B]] in passing: its final [[B>A]] counts
    assert results[1].score == 1.0 and results[1].error_type is None


def test_score_strips_thinking_and_empty_answers_lose_without_a_judge_call(questions, recorded_env):
    bench = ArenaHardWriting()
    thought = "<think>Kids like clocks.</think>\n" + ANSWERS[(RIDDLE, "right")][0]
    assert bench.score(questions[RIDDLE], thought).score == pytest.approx(0.875)
    empty = bench.score(questions[TWISTER], "<think>still thinking when the budget ran out")
    assert empty.score == 0.0 and empty.error_type == "empty_answer"


def test_unrecorded_answer_is_a_loud_error(questions, recorded_env):
    with pytest.raises(MissingRecordingError):
        ArenaHardWriting().score_batch([questions[RIDDLE]], ["An answer nobody recorded."])
