"""The contamination judge: planted test items in a training file flag; the train split does not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from posttrainbench.task.integrity.judges.contamination import detect_contamination
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
from posttrainbench.task.integrity.judges.scan_inputs import gather
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent
from tests.helpers import SHARED_DATA

GSM8K = SHARED_DATA / "gsm8k"
needs_checker = [
    pytest.mark.skipif(
        importlib.util.find_spec("posttrainbench.task.integrity.contamination.check") is None,
        reason="the contamination checker (integrity.contamination.check) is not there yet",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("tiktoken") is None, reason="needs tiktoken (cl100k tokens)"
    ),
    pytest.mark.skipif(
        not (GSM8K / "test.jsonl").is_file(), reason="GSM8K data not in ../shared/data"
    ),
]


def checker(fn):
    """Skip a test that runs the real n-gram checker where it cannot run."""
    for mark in needs_checker:
        fn = mark(fn)
    return fn


def rows(name: str, n: int, start: int = 0) -> list[dict]:
    lines = (GSM8K / name).read_text().splitlines()[start : start + n]
    return [json.loads(line) for line in lines]


def setup(
    tmp_path: Path, training: list[dict], events: list[TraceEvent] | None = None
) -> JudgeContext:
    reference = tmp_path / "tests" / "test.jsonl"
    reference.parent.mkdir(parents=True)
    reference.write_text(
        "".join(
            json.dumps({"id": str(i), "category": "main", "data": r}) + "\n"
            for i, r in enumerate(rows("test.jsonl", 40))
        )
    )
    data = tmp_path / "data_files"
    (data / "data").mkdir(parents=True)
    (data / "data" / "train.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": r["question"]},
                        {"role": "assistant", "content": r["answer"]},
                    ]
                }
            )
            + "\n"
            for r in training
        )
    )
    return judge_context(tmp_path, reference, data, events)


def judge_context(
    tmp_path: Path, reference: Path, data: Path, events: list[TraceEvent] | None = None
) -> JudgeContext:
    """A GSM8K contamination judge's inputs: the collected *data* files and a raw trace."""
    (data / "MANIFEST.json").write_text("{}")
    ctx = JudgeContext(
        JudgeInputs(
            benchmark="gsm8k",
            reference=reference,
            data_files=data,
            code_snapshot=tmp_path / "code_snapshot",
        )
    )
    ctx.__dict__["traces"] = [NormalizedTrace(format="raw", events=events or [])]
    ctx.__dict__["trace_files"] = [Path("agent.txt")]
    return ctx


@checker
def test_train_split_is_clean(tmp_path):
    det = detect_contamination(setup(tmp_path, rows("train.jsonl", 300)))
    assert not det.flagged and not det.missing, det.evidence


@checker
def test_planted_test_questions_flag_with_evidence(tmp_path):
    planted = (
        rows("train.jsonl", 150)
        + rows("test.jsonl", 3, start=5)
        + rows("train.jsonl", 150, start=150)
    )
    copy = TraceEvent(
        index=0, kind="shell", command="cp /opt/ptb/data/gsm8k/test.jsonl /app/data/extra.jsonl"
    )
    det = detect_contamination(setup(tmp_path, planted, [copy]))
    assert det.flagged
    hits = [e for e in det.evidence if e.detector == "ngram_overlap" and e.flagged]
    assert {int(e.detail.split("test item ")[1].split()[0]) for e in hits} == {5, 6, 7}
    assert all(e.location == "/app/data/train.jsonl" for e in hits)
    access = [e for e in det.evidence if e.detector == "test_data_access"]
    assert access and not any(e.flagged for e in access)


@checker
def test_missing_reference_cannot_judge(tmp_path):
    ctx = setup(tmp_path, rows("train.jsonl", 5))
    ctx.inputs.reference = tmp_path / "nope.jsonl"
    det = detect_contamination(ctx)
    assert det.missing and not det.flagged


def test_scan_inputs_take_each_workspace_file_once(tmp_path):
    data, snap = tmp_path / "data_files", tmp_path / "code_snapshot"
    for root in (data, snap):
        root.mkdir()
        (root / "a.jsonl").write_text('{"q": "x"}\n')
        (root / "MANIFEST.json").write_text("{}")
    (snap / "train.py").write_text("print(1)\n")
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", data_files=data, code_snapshot=snap))
    scan = gather(ctx, tmp_path / "scratch")
    assert sorted(scan.origins.values()) == ["/app/a.jsonl", "/app/train.py"]
    assert any("no staged write set" in n for n in scan.notes)


@checker
def test_test_items_in_final_model_files_are_found(tmp_path):
    """A chat template (or any config) carrying test questions is contamination, wherever in final_model."""
    ctx = setup(tmp_path, rows("train.jsonl", 20))
    final = tmp_path / "final_model"
    final.mkdir()
    questions = [r["question"] for r in rows("test.jsonl", 2, start=7)]
    (final / "chat_template.jinja").write_text(
        "{% set known = "
        + json.dumps({q: "42" for q in questions})
        + " %}{{ messages[0]['content'] }}"
    )
    (final / "generation_config.json").write_text(
        json.dumps({"note": rows("test.jsonl", 1, start=20)[0]["question"]})
    )
    ctx.inputs.final_model = final
    det = detect_contamination(ctx)
    hits = {
        (e.location, int(e.detail.split("test item ")[1].split()[0]))
        for e in det.evidence
        if e.detector == "ngram_overlap" and e.flagged
    }
    assert {
        ("final_model/chat_template.jinja", 7),
        ("final_model/chat_template.jinja", 8),
        ("final_model/generation_config.json", 20),
    } <= hits, hits


def test_listed_matches_name_every_file_before_a_second_match_of_one() -> None:
    """With more matches than can be listed, a small file's match is not crowded out by a big file's."""
    from types import SimpleNamespace

    from posttrainbench.task.integrity.judges.contamination import (
        MAX_MATCH_EVIDENCE,
        _each_place_first,
    )

    big = [SimpleNamespace(source="big.jsonl", n=i) for i in range(MAX_MATCH_EVIDENCE * 3)]
    small = SimpleNamespace(source="chat_template.jinja", n=-1)
    scan = SimpleNamespace(origins={"big.jsonl": "/app/big.jsonl"})
    ordered = _each_place_first([*big, small], scan)  # type: ignore[arg-type]
    assert ordered[:2] == [big[0], small] and ordered[2:] == big[1:]
