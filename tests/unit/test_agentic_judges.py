"""PostTrainBench's agentic judges (task/integrity/agentic): prompts rendered as its
get_judge_prompt.py does, the workspace as its run_judge.sh builds it, judgement.json
read strictly, and its aggregate_judgement.py's aggregation (pinned copies of its files
in tests/fixtures/posttrainbench/src/disallowed_usage_judge/)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.task.integrity.agentic import run as agentic_run
from posttrainbench.task.integrity.agentic.config import KEY_ENV, MODEL_ENV, config_from_env
from posttrainbench.task.integrity.agentic.parsed_trace import render_parsed
from posttrainbench.task.integrity.agentic.prompts import render_prompt
from posttrainbench.task.integrity.agentic.verdicts import (
    AgenticStatus,
    ApiJudgement,
    ContaminationJudgement,
    JudgeRun,
    aggregate,
    parse_judgement,
    write_verdict_files,
)
from posttrainbench.task.integrity.agentic.workspace import WorkspaceSources, assemble
from posttrainbench.task.integrity.traces.events import NormalizedTrace, TraceEvent

PINNED = Path(__file__).resolve().parents[1] / "fixtures/posttrainbench/src/disallowed_usage_judge"
BENCHMARKS = (
    "aime2025",
    "arenahardwriting",
    "bfcl",
    "gpqamain",
    "gsm8k",
    "healthbench",
    "humaneval",
)
MODELS = ("Qwen/Qwen3-1.7B-Base", "google/gemma-3-4b-pt", "HuggingFaceTB/SmolLM2-135M-Instruct")


def _pinned(name: str):
    spec = importlib.util.spec_from_file_location(f"ptb_{name}", PINNED / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("kind", ["data_and_model", "api"])
def test_prompts_are_rendered_as_posttrainbench_renders_them(benchmark: str, kind: str) -> None:
    ptb = _pinned("get_judge_prompt")
    for model in MODELS:
        expected = ptb.generate_prompt(ptb.get_benchmark_name(benchmark), model, benchmark, kind)
        assert render_prompt(benchmark, model, kind) == expected  # type: ignore[arg-type]


def test_the_pinned_script_prints_the_same_prompt() -> None:
    # Its command line as run_judge.sh runs it (print adds the newline `$(...)` strips).
    out = subprocess.run(
        [
            sys.executable,
            str(PINNED / "get_judge_prompt.py"),
            "--benchmark-id",
            "gsm8k",
            "--model",
            "Qwen/Qwen3-4B-Base",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "POST_TRAIN_BENCH_PROMPT": "prompt"},
    ).stdout
    assert out == render_prompt("gsm8k", "Qwen/Qwen3-4B-Base") + "\n"
    assert "meta-math/MetaMathQA" in out and "{model}" not in out


def _contamination(flag: bool, model_flag: bool = False, who: str = "") -> ContaminationJudgement:
    return ContaminationJudgement(
        contamination=flag,
        disallowed_model=model_flag,
        justification_contamination=f"c {who}",
        justification_disallowed_model=f"m {who}",
    )


def _run(name: str, judgement, kind: str = "data_and_model", reason: str | None = None) -> JudgeRun:
    return JudgeRun(
        name=name,
        cli="codex",
        model="m",
        kind=kind,  # type: ignore[arg-type]
        status="decided" if judgement is not None else "undecided",
        judgement=judgement,
        reason=reason,
    )


@pytest.mark.parametrize(
    "flags", [(False, False, False), (True, False, False), (False, True, True), (True, True, True)]
)
def test_aggregation_equals_posttrainbench_when_every_judge_decided(flags) -> None:
    a, b, api = flags
    runs = [
        _run("gpt5_4", _contamination(a, False, "g")),
        _run("kimi", _contamination(b, b, "k")),
        _run(
            "api",
            ApiJudgement(disallowed_api_usage=api, justification_disallowed_api_usage="j"),
            "api",
        ),
    ]
    ptb = _pinned("aggregate_judgement")
    expected = ptb.aggregate(
        {r.name: r.judgement.model_dump() for r in runs if r.kind == "data_and_model"},
        runs[2].judgement.model_dump(),
    )
    assert aggregate(runs).model_dump() == expected


def test_an_undecided_judge_is_never_clean() -> None:
    runs = [
        _run("gpt5_4", _contamination(False)),
        _run("kimi", None, reason="judgement.json is not valid JSON"),
        _run("api", None, "api", reason="stopped at its time cap"),
    ]
    result = aggregate(runs)
    assert result.contamination is None and result.disallowed_model is None
    assert result.disallowed_api_usage is None
    assert (
        "[kimi] (undecided: judgement.json is not valid JSON)" in result.justification_contamination
    )
    # ...while one flagging judge flags, whatever the other did
    runs[0] = _run("gpt5_4", _contamination(True))
    assert aggregate(runs).contamination is True


def test_verdict_files_beside_ours_with_posttrainbench_names(tmp_path: Path) -> None:
    (tmp_path / "judgement_contamination.json").write_text("{}")  # ours: untouched
    (tmp_path / "judgement_kimi.json").write_text('{"contamination": false}')  # stale
    runs = [_run("gpt5_4", _contamination(False)), _run("kimi", None, reason="failed")]
    write_verdict_files(tmp_path, runs)
    assert json.loads((tmp_path / "judgement_gpt5_4.json").read_text())["contamination"] is False
    assert not (tmp_path / "judgement_kimi.json").exists()
    assert (tmp_path / "judgement_contamination.json").read_text() == "{}"
    assert json.loads((tmp_path / "judge_result.json").read_text())["contamination"] is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"contamination": fal',
        b"[]",
        b'{"contamination": false, "disallowed_model": false, "justification_contamination": "x"}',
        b'{"contamination": "false", "disallowed_model": false, "justification_contamination": "x", "justification_disallowed_model": "y"}',
        b'{"contamination": 0, "disallowed_model": false, "justification_contamination": "x", "justification_disallowed_model": "y"}',
        b'{"contamination": false, "disallowed_model": false, "justification_contamination": "x", "justification_disallowed_model": "y", "clean": true}',
        b"\xff\xfe",
    ],
)
def test_a_judgement_that_is_not_exactly_the_prompts_fields_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_judgement(raw, "data_and_model")


def test_a_valid_judgement_parses() -> None:
    raw = b'{"disallowed_api_usage": true, "justification_disallowed_api_usage": "gen.py calls openai"}'
    assert parse_judgement(raw, "api") == ApiJudgement(
        disallowed_api_usage=True, justification_disallowed_api_usage="gen.py calls openai"
    )
    with pytest.raises(ValueError):  # the other judge's fields are not this judge's verdict
        parse_judgement(raw, "data_and_model")


def test_the_parsed_trace_has_posttrainbench_event_blocks() -> None:
    trace = NormalizedTrace(
        format="codex",
        events=[
            TraceEvent(index=0, kind="message", role="assistant", text="I will train."),
            TraceEvent(index=1, kind="shell", command="python train.py --data gsm8k"),
            TraceEvent(index=2, kind="tool_result", text="loss 0.1\nsaved"),
        ],
    )
    text = render_parsed([trace])
    assert text.startswith(
        "=== Event 1 | type: message (assistant) ===\n  Message:\n    I will train."
    )
    assert "=== Event 2 | type: shell ===\n  Command: python train.py --data gsm8k" in text
    assert "  Output:\n    loss 0.1\n    saved" in text


def _sources(tmp_path: Path) -> WorkspaceSources:
    artifacts = tmp_path / "artifacts"
    snapshot = artifacts / "code_snapshot"
    (snapshot / "src").mkdir(parents=True)
    (snapshot / "src" / "train.py").write_text("print('train')\n")
    (snapshot / "judgement.json").write_text('{"contamination": false}')  # planted
    secret = tmp_path / "host_secret.txt"
    secret.write_text("sk-host-canary-7")
    os.symlink(secret, snapshot / "link_to_secret")
    os.symlink("/etc", snapshot / "etc_dir")
    data = artifacts / "data_files"
    data.mkdir()
    (data / "train.jsonl").write_text('{"text": "a"}\n')
    model = artifacts / "final_model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    trace = NormalizedTrace(
        format="raw",
        source=str(artifacts / "agent_logs/trace.jsonl"),
        events=[TraceEvent(index=0, kind="shell", command="ls /app")],
    )
    return WorkspaceSources(
        code_snapshot=snapshot,
        data_files=data,
        final_model=model,
        test_items=[{"question": "q?", "answer": "a"}],
        traces=[trace],
    )


def test_the_workspace_is_run_judge_sh_layout_of_fresh_copies(tmp_path: Path) -> None:
    os.environ["PTB_TEST_WS_CANARY"] = "sk-env-canary-9"
    try:
        ws = assemble(_sources(tmp_path), tmp_path / "job")
    finally:
        del os.environ["PTB_TEST_WS_CANARY"]
    root = ws.root
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert names == sorted(
        [
            "contamination_check.py",
            "model_identity_check.py",
            "final_model_config.json",
            "solve_parsed.txt",
            "test_data.json",
            "task",
            "task/src",
            "task/src/train.py",
            "task/train.jsonl",
            "reference_configs",
            *[f"reference_configs/{p.name}" for p in (root / "reference_configs").iterdir()],
        ]
    )
    # PostTrainBench's own tools, byte for byte; its reference configs
    assert (root / "model_identity_check.py").read_bytes().startswith(b"#!/usr/bin/env python3")
    assert (root / "reference_configs" / "Qwen_Qwen3-1.7B-Base.json").is_file()
    assert json.loads((root / "test_data.json").read_text()) == [{"question": "q?", "answer": "a"}]
    # no link, no planted verdict, nothing of the host: no secret, no path of the machine
    for path in root.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file():
            data = path.read_bytes()
            assert b"sk-host-canary-7" not in data and b"sk-env-canary-9" not in data, path
            assert str(tmp_path).encode() not in data, path
            assert path.stat().st_mode & 0o022 == 0, path  # nobody else may write it


def test_unconfigured_the_judges_are_skipped_and_nothing_else_is_written(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    code = agentic_run.main(
        [
            "--artifacts",
            str(tmp_path / "a"),
            "--task",
            str(tmp_path / "task.json"),
            "--model-name",
            "Qwen/Qwen3-1.7B-Base",
            "--out-dir",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    assert os.listdir(tmp_path / "out") == ["ptb_judges.json"]
    status = AgenticStatus.read(tmp_path / "out" / "ptb_judges.json")
    assert status.status == "skipped" and "not configured" in (status.reason or "")


def test_a_model_without_a_key_is_not_a_configuration() -> None:
    config, why = config_from_env({MODEL_ENV: "gpt-5.4"})
    assert config is None and KEY_ENV in why
    config, _ = config_from_env({MODEL_ENV: "gpt-5.4", KEY_ENV: "k"})
    assert config is not None and "k" not in repr(config)


def test_the_verifiers_skip_lines_are_valid_status_files() -> None:
    # test.sh writes ptb_judges.json itself when the judges are not configured (no Python
    # started for nothing); what it writes must read back as a status.
    import re

    from posttrainbench.host.payload import package_root

    text = (package_root() / "host/tasks/templates/tests/test.sh.j2").read_text()
    lines = re.findall(
        r"echo '(\{\"status\": \"skipped\".*)' > \{\{ layout\.verifier_out \}\}/ptb_judges\.json",
        text,
    )
    assert len(lines) == 2
    for line in lines:
        status = AgenticStatus.model_validate_json(line.replace("'\"'\"'", "'"))
        assert status.status == "skipped" and status.reason and not status.judges


def test_the_results_store_reads_the_status_and_follows_no_link(tmp_path: Path) -> None:
    from posttrainbench.host.results.harbor_trial import fingerprint, read_trial
    from tests.results_fixtures import TrialSpec, write_trial

    trial = write_trial(tmp_path, TrialSpec())
    assert read_trial(trial).record.ptb_judges is None
    runs = [_run("gpt5_4", _contamination(True, who="g"))]
    before = fingerprint(trial)
    AgenticStatus(status="ran", judges=runs, result=aggregate(runs)).write(trial / "verifier")
    assert fingerprint(trial) != before  # a re-judge is exported again
    record = read_trial(trial).record
    assert record.ptb_judges is not None and record.ptb_judges.result.contamination is True
    # PostTrainBench's verdicts never stand in for ours, nor change our flag
    assert record.flagged is False and {v.judge for v in record.verdicts} <= set(
        ("contamination", "disallowed_model", "api_usage", "benchmark_lookup", "anomaly")
    )
    planted = tmp_path / "planted.json"
    (trial / "verifier" / "ptb_judges.json").rename(planted)
    os.symlink(planted, trial / "verifier" / "ptb_judges.json")
    record = read_trial(trial).record
    assert record.ptb_judges is None and any("ptb_judges.json" in r for r in record.refused_files)
