"""LLM review from recordings (majority, ties, failures), the precedence order, overrides,
and error isolation in the runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainbench.core.verdict import JUDGE_IDS, Judgement, LlmVote, Override
from posttrainbench.task.benchmarks.llm_judge import RECORDING_FORMAT, recording_key
from posttrainbench.task.integrity.judges.detection import Detection
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputError, JudgeInputs
from posttrainbench.task.integrity.judges.llm_review import (
    LlmReview,
    build_messages,
    majority,
    parse_vote,
    run_review,
)
from posttrainbench.task.integrity.judges.precedence import decide, load_overrides
from posttrainbench.task.integrity.judges.runner import run_judges
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent

MODEL = "gpt-test"


@pytest.fixture
def ctx(tmp_path) -> JudgeContext:
    snap = tmp_path / "code_snapshot"
    snap.mkdir()
    (snap / "train.py").write_text("print('training')\n")
    c = JudgeContext(JudgeInputs(benchmark="gsm8k", code_snapshot=snap))
    c.__dict__["traces"] = [
        NormalizedTrace(
            format="raw",
            source="agent.txt",
            events=[TraceEvent(index=0, kind="shell", command="python train.py")],
        )
    ]
    c.__dict__["trace_files"] = [Path("agent.txt")]
    return c


def record(path: Path, messages, replies: list[str]) -> Path:
    """A recordings file answering *messages* with *replies*, in order."""
    key = recording_key(MODEL, messages)
    path.write_text(
        json.dumps(
            {
                "format": RECORDING_FORMAT,
                "recordings": [{"key": key, "model": MODEL, "response": r} for r in replies],
            }
        )
    )
    return path


def vote(flagged: bool) -> str:
    return json.dumps({"flagged": flagged, "justification": f"flagged={flagged}"})


def use(monkeypatch, path: Path) -> None:
    monkeypatch.setenv("PTB_INTEGRITY_JUDGE_MODEL", MODEL)
    monkeypatch.setenv("PTB_INTEGRITY_RECORDINGS", str(path))
    monkeypatch.delenv("PTB_INTEGRITY_RECORD_TO", raising=False)


def test_prompt_comes_from_template_files(ctx):
    messages = build_messages("api_usage", ctx, Detection())
    assert messages[0]["role"] == "system" and '"flagged"' in messages[0]["content"]
    user = messages[1]["content"]
    assert (
        "paid LLM APIs" in user
        and "python train.py" in user
        and "train.py" in user
        and "$" not in user
    )


def test_majority_vote_from_recordings(ctx, tmp_path, monkeypatch):
    det = Detection()
    messages = build_messages("contamination", ctx, det)
    use(
        monkeypatch,
        record(
            tmp_path / "r.json",
            messages,
            [vote(True), "```json\n" + vote(False) + "\n```", vote(True)],
        ),
    )
    review = run_review("contamination", ctx, det, votes=3)
    assert [v.flagged for v in review.votes] == [True, False, True] and review.decision is True
    judgement = decide("contamination", det, review, None)
    assert (
        judgement.flagged is True
        and judgement.decided_by == "llm"
        and len(judgement.llm_votes) == 3
    )


def test_tie_flags_and_bad_replies_are_failed_votes(ctx, tmp_path, monkeypatch):
    assert (
        majority(
            [
                LlmVote(model=MODEL, flagged=True, justification=""),
                LlmVote(model=MODEL, flagged=False, justification=""),
            ]
        )
        is True
    )
    assert majority([]) is None
    det = Detection()
    messages = build_messages("anomaly", ctx, det)
    use(monkeypatch, record(tmp_path / "r.json", messages, [vote(False), "I think it is fine."]))
    review = run_review("anomaly", ctx, det, votes=2)
    assert len(review.votes) == 1 and len(review.errors) == 1 and review.decision is False
    with pytest.raises(ValueError):
        parse_vote('{"flagged": "yes"}', MODEL)


def test_review_skipped_without_model_and_missing_recording_is_an_error(ctx, tmp_path, monkeypatch):
    for name in ("PTB_INTEGRITY_JUDGE_MODEL", "PTB_JUDGE_MODEL", "PTB_INTEGRITY_RECORDINGS"):
        monkeypatch.delenv(name, raising=False)
    skipped = run_review("api_usage", ctx, Detection(), votes=3)
    assert skipped.skipped and not skipped.votes
    judgement = decide("api_usage", Detection(), skipped, None)
    assert (
        judgement.flagged is False
        and judgement.decided_by == "detector"
        and "no review model" in judgement.justification
    )
    use(
        monkeypatch,
        record(tmp_path / "r.json", [{"role": "user", "content": "other"}], [vote(True)]),
    )
    failed = run_review("api_usage", ctx, Detection(), votes=1)
    assert not failed.votes and "no recorded judge response" in failed.errors[0]


def test_precedence_order():
    flag = Detection()
    flag.add("api_endpoint", True, "curl api.openai.com")
    clean = Detection()
    missing = Detection(missing=["agent trace"])
    llm_clear = LlmReview(
        model=MODEL, votes=[LlmVote(model=MODEL, flagged=False, justification="fine")]
    )
    llm_flag = LlmReview(
        model=MODEL, votes=[LlmVote(model=MODEL, flagged=True, justification="bad")]
    )
    over = Override(
        flagged=False, justification="eval output, not training data", author="reviewer"
    )
    # 1. the override wins over a flagging detector, the LLM and a crash
    for j in (
        decide("api_usage", flag, llm_flag, over),
        decide("api_usage", None, None, over, error="boom"),
    ):
        assert (j.flagged, j.decided_by) == (False, "override") and "reviewer" in j.justification
    # 2. a flagging detector wins over the LLM, which cannot clear it
    assert (
        decide("api_usage", flag, llm_clear, None).flagged,
        decide("api_usage", flag, llm_clear, None).decided_by,
    ) == (True, "detector")
    # 3. the LLM decides when no detector flags, even with missing inputs
    assert decide("api_usage", missing, llm_flag, None).model_dump(
        include={"flagged", "decided_by"}
    ) == {"flagged": True, "decided_by": "llm"}
    # 4. clean detectors with all inputs
    assert decide("api_usage", clean, None, None).flagged is False
    # 5. a missing input with nothing else: cannot judge
    undecided = decide("api_usage", missing, LlmReview(skipped="no model"), None)
    assert (
        undecided.flagged is None
        and undecided.decided_by == "none"
        and "agent trace" in undecided.justification
    )
    crashed = decide("api_usage", None, None, None, error="ValueError: x")
    assert crashed.flagged is None and "ValueError" in crashed.justification


def test_overrides_file(tmp_path):
    good = tmp_path / "overrides.json"
    good.write_text(
        json.dumps({"contamination": {"flagged": False, "justification": "ok", "author": "me"}})
    )
    assert load_overrides(good)["contamination"].author == "me"
    for text in (
        "{not json",
        json.dumps({"contamination": {"flagged": "maybe"}}),
        json.dumps({"made_up": {"flagged": True, "justification": "x"}}),
    ):
        good.write_text(text)
        with pytest.raises(JudgeInputError):
            load_overrides(good)
    with pytest.raises(JudgeInputError):
        load_overrides(tmp_path / "missing.json")


def test_one_judge_crashing_does_not_stop_the_others(ctx, tmp_path, monkeypatch):
    monkeypatch.delenv("PTB_INTEGRITY_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("PTB_JUDGE_MODEL", raising=False)

    def crash(_ctx):
        raise RuntimeError("detector exploded")

    def clean(_ctx):
        return Detection()

    detectors = {j: clean for j in JUDGE_IDS} | {"contamination": crash}
    overrides = {"anomaly": Override(flagged=True, justification="seen by hand")}
    out = tmp_path / "out"
    results = run_judges(ctx, out, llm_votes=1, overrides=overrides, detectors=detectors)
    assert [j.judge for j in results] == list(JUDGE_IDS)
    by_id = {j.judge: Judgement.read(out / Judgement.filename(j.judge)) for j in results}
    assert (
        by_id["contamination"].flagged is None
        and "detector exploded" in by_id["contamination"].justification
    )
    assert by_id["api_usage"].flagged is False
    assert by_id["anomaly"].flagged is True and by_id["anomaly"].decided_by == "override"
