"""Arena-Hard Writing against PostTrainBench's own code: for the same judge replies, the
same judge requests, per-question scores and aggregate (offline, scripted judge).

PostTrainBench's ``evaluate.py`` and ``judge_utils.py`` / ``arena-hard-v2.0.yaml`` are
pinned verbatim in tests/fixtures/posttrainbench/arenahardwriting/ (see its README.md);
their heavy imports are stubbed, pandas by a shim when it is not installed.
"""

from __future__ import annotations

import gzip
import importlib.util
import inspect
import json
import math
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from posttrainbench.task.benchmarks.arenahard import benchmark as arena
from posttrainbench.task.benchmarks.arenahard import judging, source
from posttrainbench.task.benchmarks.arenahard.benchmark import ArenaHardWriting
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split
from tests.data_fixtures import prepared

PTB = Path(__file__).resolve().parents[1] / "fixtures" / "posttrainbench" / "arenahardwriting"
ALIAS = "final_model"


# --- PostTrainBench's module, imported with stubs for what it does not need here ---------


class _Series:
    """The pandas Series operations ``_compute_metrics`` uses (evaluate.py:611-625)."""

    def __init__(self, values):
        self.values = list(values)

    def astype(self, kind):
        return _Series(kind(v) for v in self.values)

    def __len__(self):
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def mean(self):
        return math.fsum(self.values) / len(self.values)

    def std(self, ddof=1):
        n = len(self.values)
        if n - ddof <= 0:
            return float("nan")
        m = self.mean()
        return math.sqrt(math.fsum((v - m) ** 2 for v in self.values) / (n - ddof))


class _DataFrame:
    """The DataFrame operations ``_judgments_to_battles`` uses (evaluate.py:672-674)."""

    def __init__(self, rows=()):
        self.rows = [dict(r) for r in rows]

    def explode(self, column):
        if not self.rows:
            raise KeyError(column)  # as pandas does on a frame without the column
        return _DataFrame({**r, column: v} for r in self.rows for v in r[column])

    def reset_index(self, drop=False):
        return self

    def __getitem__(self, column):
        return _Series(r[column] for r in self.rows)


def _module(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


def _unused(*args, **kwargs):
    raise AssertionError("not used by the functions under test")


@pytest.fixture(scope="module")
def ptb():
    """PostTrainBench's arenahardwriting/evaluate.py, its own ``evaluation_code`` beside it."""
    with pytest.MonkeyPatch.context() as mp:
        pkg = _module("evaluation_code", __path__=[str(PTB / "evaluation_code")])
        utils = _module("evaluation_code.utils", __path__=[str(PTB / "evaluation_code" / "utils")])
        mp.setitem(sys.modules, "evaluation_code", pkg)
        mp.setitem(sys.modules, "evaluation_code.utils", utils)
        mp.setitem(
            sys.modules,
            "evaluation_code.utils.add_markdown_info",
            _module(
                "evaluation_code.utils.add_markdown_info",
                count_markdown_elements=_unused,
                remove_pattern=_unused,
            ),
        )
        mp.setitem(
            sys.modules,
            "evaluation_code.utils.completion",
            _module(
                "evaluation_code.utils.completion",
                load_model_answers=_unused,
                load_questions=_unused,
                make_config=lambda path: yaml.safe_load(Path(path).read_text()),
            ),
        )
        mp.setitem(
            sys.modules,
            "evaluation_code.show_result",
            _module(
                "evaluation_code.show_result", load_judgments=_unused, print_leaderboard=_unused
            ),
        )
        try:
            import pandas  # noqa: F401  (the real one when installed)
        except ImportError:
            mp.setitem(sys.modules, "pandas", _module("pandas", DataFrame=_DataFrame))
        for name in ("requests", "shortuuid", "tiktoken", "tqdm"):
            try:
                __import__(name)
            except ImportError:
                mp.setitem(sys.modules, name, _module(name, tqdm=_unused))
        judge_utils = _load(
            "evaluation_code.utils.judge_utils", PTB / "evaluation_code/utils/judge_utils.py"
        )
        mp.setitem(sys.modules, "evaluation_code.utils.judge_utils", judge_utils)
        module = _load("ptb_arenahardwriting_evaluate", PTB / "evaluate.py")
        module.config = yaml.safe_load(
            (PTB / "evaluation_code/config/arena-hard-v2.0.yaml").read_text()
        )
        yield module


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ptb_extract(ptb, content: str) -> str:
    """PostTrainBench's answer extraction, inline in generate_answers (evaluate.py:361,
    377-382): strip, drop a leading think block, limit repetitions (its own function)."""
    answer_text = content.strip()
    if answer_text.startswith("<think>") and ("</think>" in answer_text):
        answer_text = answer_text.split("</think>", maxsplit=1)[1]
        answer_text = answer_text.strip()
    return ptb.limit_repetitions(answer_text)


# --- the scripted scenarios ------------------------------------------------------------------

REPEATED = "The wind sang over the dunes.\n" * 12 + "And then it was quiet."
# (candidate completion, reply to game 1 (baseline as A), reply to game 2 (candidate as A));
# a reply of None is a failed judge request (PostTrainBench: call_openai returns None).
SCENARIOS = [
    ("A short poem about rain on a tin roof.", "[[A>>B]]", "My final verdict: [[B>>A]]"),
    ("A vivid story about a lighthouse keeper.", "Verdict: [[B>>A]]", "[[A>>B]]"),
    ("A limerick about a cat.", "[[A>B]]", "[[A<B]]"),
    ("A haiku about autumn leaves.", "[[B>A]]", "[[B<A]]"),
    ("An essay on friendship.", "Tie: [[A=B]]", "[[B=A]]"),
    ("A fable about a fox.", "[[A<<B]]", "[[B<<A]]"),
    ("A letter to a friend.", "my final verdict is: [[b>a]]", "Verdict [A>B]"),
    ("A sonnet about the sea.", "At first [[A>B]]; on reflection: [[B>>A]]", "[[A=B]]"),
    ("A dialogue between two trees.", "Both answers are fine.", "[[A>B]]"),
    ("A speech for a wedding.", None, "[[B>A]]"),
    ("<think>Plan: a scary tale.</think>\n\nA ghost story in a library.", "[[B>A]]", "[[A>B]]"),
    (REPEATED, "[[A=B]]", "[[A>>B]]"),
    ("<think>an unfinished thought, judged as it is", "[[A>>B]]", "[[B>A]]"),
]


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return read_split("arenahardwriting", "test", prepared("arenahardwriting"))[: len(SCENARIOS)]


def script(ptb, samples) -> dict[str, str | None]:
    """User prompt -> reply, for the requests PostTrainBench's template gives."""
    template = ptb.config["prompt_template"]
    replies: dict[str, str | None] = {}
    for s, (completion, r1, r2) in zip(samples, SCENARIOS):
        base, cand = s.data["baseline_answer"], ptb_extract(ptb, completion)
        replies[template.format(QUESTION=s.data["prompt"], ANSWER_A=base, ANSWER_B=cand)] = r1
        replies[template.format(QUESTION=s.data["prompt"], ANSWER_A=cand, ANSWER_B=base)] = r2
    return replies


class ScriptedJudge:
    """Our judge client, answering from the script and recording each request."""

    model = "gpt-5-mini"

    def __init__(self, replies):
        self.replies = replies
        self.calls: list[dict] = []

    def complete(self, messages, *, temperature, max_tokens, reasoning_effort=None):
        self.calls.append(
            {
                "messages": messages,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "reasoning_effort": reasoning_effort,
            }
        )
        reply = self.replies[messages[-1]["content"]]
        if reply is None:
            raise RuntimeError("judge API unavailable")
        return reply


def ptb_judgments(ptb, samples, replies, monkeypatch):
    """PostTrainBench's judgment records from its ``_judge_single_question`` (evaluate.py:534)."""
    baseline = ptb.JUDGE_SETTINGS["creative_writing"]["baseline"]
    answers = {
        baseline: {
            r["uid"]: r
            for r in map(
                json.loads, gzip.decompress(source.PACKAGED_BASELINE.read_bytes()).splitlines()
            )
        },
        ALIAS: {
            s.id: {
                "uid": s.id,
                "model": ALIAS,
                "messages": [
                    {"role": "user", "content": s.data["prompt"]},
                    {"role": "assistant", "content": {"answer": ptb_extract(ptb, completion)}},
                ],
            }
            for s, (completion, _, _) in zip(samples, SCENARIOS)
        },
    }

    def call_openai(messages):
        reply = replies[messages[-1]["content"]]
        return None if reply is None else {"answer": reply}

    monkeypatch.setattr(ptb, "call_openai", call_openai)
    args = SimpleNamespace(model_alias=ALIAS)
    return [
        ptb._judge_single_question(
            {"uid": s.id, "category": "creative_writing", "prompt": s.data["prompt"]},
            args,
            answers,
            ptb.config["prompt_template"],
            ptb.config["regex_patterns"],
        )
        for s in samples
    ]


@pytest.fixture
def both(ptb, samples, monkeypatch):
    replies = script(ptb, samples)
    judge = ScriptedJudge(replies)
    ours = ArenaHardWriting(judge=judge).score_batch(samples, [c for c, _, _ in SCENARIOS])
    theirs = ptb_judgments(ptb, samples, replies, monkeypatch)
    return ours, theirs, judge


# --- tests -------------------------------------------------------------------------------


def test_settings_are_posttrainbenchs(ptb):
    assert judging.SYSTEM_PROMPT == ptb.JUDGE_SETTINGS["creative_writing"]["system_prompt"]
    assert judging.USER_TEMPLATE == ptb.config["prompt_template"]
    assert [p.pattern for p in judging.PATTERNS] == ptb.config["regex_patterns"]
    assert source.BASELINE_MODEL == ptb.JUDGE_SETTINGS["creative_writing"]["baseline"]
    assert arena.DEFAULT_JUDGE == ptb.JUDGE_MODEL == ArenaHardWriting.default_judge_model
    assert arena.JUDGE_MAX_TOKENS == ptb.JUDGE_MAX_COMPLETION
    assert arena.JUDGE_REASONING_EFFORT == ptb.REASONING_EFFORT
    weight = inspect.signature(ptb._judgments_to_battles).parameters["weight"].default
    assert judging.STRONG_WEIGHT == weight


def test_judge_messages_are_byte_equal_to_posttrainbenchs(both):
    ours, theirs, judge = both
    sent = {json.dumps(c["messages"], ensure_ascii=False) for c in judge.calls}
    for record in theirs[:2]:  # two questions, both games each
        for game in record["games"]:
            assert json.dumps(game["prompt"], ensure_ascii=False) in sent
    # and every request, in PostTrainBench's order of games per question
    ptb_sent = [json.dumps(g["prompt"], ensure_ascii=False) for r in theirs for g in r["games"]]
    assert sorted(ptb_sent) == sorted(sent) and len(judge.calls) == len(ptb_sent)
    assert {(c["temperature"], c["max_tokens"], c["reasoning_effort"]) for c in judge.calls} == {
        (None, 49152, "medium")  # call_openai: no temperature, evaluate.py:412-420
    }


def test_labels_equal_posttrainbenchs_get_score(both):
    ours, theirs, _ = both
    for result, record in zip(ours, theirs):
        ptb_labels = [g["score"] for g in record["games"]]
        assert result.detail.count("no verdict label") + result.detail.count("judge error") == (
            ptb_labels.count(None)
        )
        for label in ptb_labels:
            if label is not None:
                assert label in result.detail


def test_per_question_scores_equal_posttrainbenchs(ptb, both):
    ours, theirs, _ = both
    for result, record in zip(ours, theirs):
        if any(g["score"] is None for g in record["games"]):
            assert result.battles == ()  # PostTrainBench leaves the question out
            assert result.error_type in ("judge_partial", "judge_unparseable")
            continue
        exploded = ptb._judgments_to_battles([record])
        assert sorted(result.battles) == sorted(float(s) for s in exploded["scores"])
        assert result.score == pytest.approx(ptb._compute_metrics(exploded)["accuracy"], abs=1e-12)
        assert result.error_type is None


def test_aggregate_equals_posttrainbenchs(ptb, both):
    ours, theirs, _ = both
    expected = ptb._compute_metrics(ptb._judgments_to_battles(theirs))
    got = ArenaHardWriting(judge=ScriptedJudge({})).aggregate_scores(ours)
    assert got == pytest.approx(expected, abs=1e-12)
    assert sum(len(r.battles) for r in ours) == len(ptb._judgments_to_battles(theirs)["scores"])
    assert 0.0 < got["accuracy"] < 1.0 and got["stderr"] > 0.0


def test_one_battle_list_and_none(ptb):
    one = ptb._judgments_to_battles(
        [
            {
                "uid": "u",
                "category": "c",
                "model": ALIAS,
                "baseline": "b",
                "games": [{"score": "A=B"}, {"score": "A>B"}],
            }
        ]
    )
    mine = [judging.ArenaScore(0.75, battles=judging.battles("A=B", "A>B"))]
    assert judging.ptb_metrics(mine) == pytest.approx(ptb._compute_metrics(one))
    assert judging.ptb_metrics([]) == {"accuracy": 0.0, "stderr": 0.0}  # evaluate.py:615-616


def test_candidate_answer_is_posttrainbenchs_extraction(ptb):
    for completion, _, _ in SCENARIOS:
        assert judging.candidate_answer(completion) == ptb_extract(ptb, completion)
    assert judging.candidate_answer(REPEATED).count("The wind sang") == ptb.MAX_REPETITIONS
    assert (
        judging.candidate_answer("  Text <think>kept</think> too ")
        == "Text <think>kept</think> too"
    )


def test_a_label_posttrainbench_cannot_score_is_an_unscored_game(ptb):
    """[[A]] matches the config's patterns; PostTrainBench's score table has no entry for it
    and its _judgments_to_battles raises KeyError; here the game is unscored."""
    patterns = ptb.config["regex_patterns"]
    assert ptb.get_score("My verdict: [[A]]", patterns) == "A"
    record = {
        "uid": "u",
        "category": "c",
        "model": ALIAS,
        "baseline": "b",
        "games": [{"score": "A"}, {"score": "A>B"}],
    }
    with pytest.raises(KeyError):
        ptb._judgments_to_battles([record])
    assert judging.parse_verdict("My verdict: [[A]]") is None


@pytest.mark.parametrize(
    "reply",
    [
        "[[A>>B]]",
        "x [[a>b]] y",
        "[B>A]",
        "[[A>B]] then [[B<<A]]",
        "[A>B] and then [[A=B]]",
        "no label",
        "[[C>A]]",
        "<think>[[A>>B]]</think>",
        "[[B=A]]\n[A<B]",
    ],
)
def test_parse_verdict_equals_get_score(ptb, reply):
    got = ptb.get_score(reply, ptb.config["regex_patterns"])
    assert judging.parse_verdict(reply) == (got if got in ptb.VERDICTS_KNOWN else None)


@pytest.fixture(scope="module", autouse=True)
def _known_labels(ptb):
    # The labels PostTrainBench's score table knows (evaluate.py:632-643).
    ptb.VERDICTS_KNOWN = {"A>B", "A>>B", "A=B", "A<<B", "A<B", "B>A", "B>>A", "B=A", "B<<A", "B<A"}
    assert set(judging.VERDICTS) == ptb.VERDICTS_KNOWN


def test_questions_are_posttrainbenchs_in_its_order(samples):
    """The split is PostTrainBench's question file in its Random(42) order: the order in
    which it generated its own Qwen3-1.7B answers (the baseline file's line order)."""
    test = read_split("arenahardwriting", "test", prepared("arenahardwriting"))
    baseline_order = [
        json.loads(line)["uid"]
        for line in gzip.decompress(source.PACKAGED_BASELINE.read_bytes()).splitlines()
    ]
    assert [s.id for s in test] == baseline_order and len(test) == 250
    assert {s.data["baseline_model"] for s in test} == {"Qwen3-1.7B"}
