"""`ptb eval --max-new-tokens N --batch-size B`: validated on the host, passed to the
evaluation module, and applied by `evaluate_model` to the benchmark's decoding settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posttrainbench.host.cli.app import app
from tests.helpers import run_ptb


def _model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return model


def test_flags_reach_the_evaluation_module(tmp_path: Path, monkeypatch) -> None:
    import posttrainbench.host.data.prepare as prepare
    import posttrainbench.host.envs.eval_env as eval_env

    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(prepare, "prepare_benchmark", lambda benchmark: None)
    monkeypatch.setattr(eval_env, "evaluation_python", lambda say: "python")
    monkeypatch.setattr(
        eval_env, "run_module", lambda py, module, args, env: calls.append((module, args)) or 0
    )
    model = _model_dir(tmp_path)
    result = CliRunner().invoke(
        app,
        ["eval", "-b", "gsm8k", "--model-path", str(model)]
        + ["--max-new-tokens", "64", "--batch-size", "8"],
    )
    assert result.exit_code == 0, result.output
    ((module, args),) = calls
    assert module == "posttrainbench.task.evaluation.evaluate"
    assert args[args.index("--max-new-tokens") + 1] == "64"
    assert args[args.index("--batch-size") + 1] == "8"


def test_evaluation_module_applies_the_token_cap(monkeypatch, tmp_path: Path) -> None:
    """evaluate.py hands both values to evaluate_model, which replaces the benchmark's cap."""
    import posttrainbench.task.evaluation.runner as runner
    from posttrainbench.task.evaluation import evaluate

    seen: dict = {}

    class _Stop(Exception):
        pass

    def fake_generate(backend, prompts, settings, seed, stop_fn, deadline, **kw):
        seen["max_new_tokens"], seen["batch_size"] = settings.max_new_tokens, kw["batch_size"]
        raise _Stop

    class _Backend:
        name = "fake"
        tokenizer = None

    monkeypatch.setattr(runner, "generate_with_retries", fake_generate)
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.backends.make_backend", lambda *a, **k: _Backend()
    )
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.chat_format.render_chat", lambda *args, **kwargs: "p"
    )
    monkeypatch.setattr(
        "posttrainbench.task.evaluation.chat_format.read_model_config", lambda path: {}
    )
    from posttrainbench.task.benchmarks import get_benchmark
    from posttrainbench.task.benchmarks.base import Sample

    bench = get_benchmark("gsm8k")
    monkeypatch.setattr(
        type(bench),
        "load",
        lambda self, split, limit: [Sample(id="1", category="c", data={"question": "1+1?"})],
    )
    with pytest.raises(_Stop):
        evaluate.main(
            ["--benchmark", "gsm8k", "--model-path", str(tmp_path), "--model-name", "qwen"]
            + ["--max-new-tokens", "7", "--batch-size", "3"]
        )
    assert seen == {"max_new_tokens": 7, "batch_size": 3}
    seen.clear()  # PostTrainBench's spellings of the same two flags
    with pytest.raises(_Stop):
        evaluate.main(
            ["--benchmark", "gsm8k", "--model-path", str(tmp_path), "--model-name", "qwen"]
            + ["--max-tokens", "9", "--max-connections", "2"]
        )
    assert seen == {"max_new_tokens": 9, "batch_size": 2}


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--max-new-tokens", "0", "invalid --max-new-tokens '0': must be a positive integer"),
        ("--batch-size", "-4", "invalid --batch-size '-4': must be a positive integer"),
        ("--batch-size", "many", "invalid --batch-size 'many': must be a positive integer"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(
    tmp_path: Path, flag: str, value: str, expected: str
) -> None:
    model = _model_dir(tmp_path)
    result = run_ptb("eval", "-b", "gsm8k", "--model-path", str(model), flag, value)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("benchmark", "keys"), [("gsm8k", ["accuracy", "stderr"]), ("bfcl", ["accuracy"])]
)
def test_json_output_file_holds_posttrainbenchs_keys(tmp_path, benchmark, keys):
    """What its evaluate.py writes: inspect's metrics of the task (BFCL has no stderr)."""
    out = tmp_path / "m.json"
    from posttrainbench.task.evaluation import evaluate

    evaluate._write_ptb_metrics(out, benchmark, {"accuracy": 0.5, "stderr": 0.1})
    assert list(json.loads(out.read_text())) == keys
