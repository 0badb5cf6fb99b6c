"""Throughput and start-up of `ptb contamination check`, run as a command, on a mixed corpus.

Writes the mixed corpus of corpus.py (chat JSONL, Python source as JSONL, plain text,
with planted GSM8K test items), then measures in one run, each as a subprocess:

  * small checks (one small JSONL file): the first one with an empty reference cache,
    then repeated ones, through `python -m ...contamination` (what the task's
    check_contamination.sh runs) and through `ptb contamination check`;
  * the whole corpus with one worker (per-core rate) and with one worker per CPU: wall
    time of the whole command, the command's own timer, and its CPU time;
  * the straightforward pure-Python checker (naive.py, in this process) on a prefix of
    each file, and the command on the same prefix: their matches must be identical.

Prints found/planted and false positives next to each speed; exits 1 when anything
disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from corpus import FILES, GSM8K, Plant, write_corpus

from posttrainbench.task.integrity.contamination.check import default_workers
from posttrainbench.task.integrity.contamination.naive import naive_check
from posttrainbench.task.integrity.contamination.reference import ReferenceItem, write_reference

REPO = Path(__file__).resolve().parents[2]
PTB = [str(REPO / ".venv" / "bin" / "ptb"), "contamination", "check"]
MODULE = [sys.executable, "-m", "posttrainbench.task.integrity.contamination"]


def run_command(argv: list[str], env: dict) -> tuple[dict | None, float, float]:
    """(the --json report or None, wall seconds, CPU seconds of the command and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout) if "--json" in argv else None
    return report, wall, cpu


def found(report: dict, plants: list[Plant]) -> tuple[int, int]:
    """(planted items found, false positives) of a --json report."""
    expected = {(p.file, p.item) for p in plants}
    got = {(Path(m["source"]).name, m["test_index"]) for m in report["matches"]}
    return len(expected & got), len(got - expected)


def write_prefix(corpus: Path, prefix: Path, megabytes: float) -> None:
    """The first megabytes/3 MB of each corpus file, cut at a record boundary."""
    prefix.mkdir(exist_ok=True)
    for name in FILES:
        with (corpus / name).open("rb") as src:
            data = src.read(int(megabytes * 1e6 / 3))
        sep = b"\n\n" if name.endswith(".txt") else b"\n"
        (prefix / name).write_bytes(data[: data.rfind(sep) + len(sep)])


def uptime() -> str:
    """The machine's load, as `uptime` prints it."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300.0, help="corpus size in MB")
    parser.add_argument("--planted", type=int, default=10)
    parser.add_argument(
        "--naive-mb", type=float, default=6.0, help="prefix the naive checker reads"
    )
    parser.add_argument("--small-runs", type=int, default=5, help="repeats of the small check")
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "bench" / "contamination")
    args = parser.parse_args()
    if not (GSM8K / "test.jsonl").exists():
        print(f"needs GSM8K at {GSM8K}", file=sys.stderr)
        return 1
    print(f"start: {uptime()}")
    reference = [
        ReferenceItem(question=r["question"], answer=r["answer"])
        for r in map(json.loads, (GSM8K / "test.jsonl").read_text().splitlines())
    ]
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    ref_path = write_reference(reference, work / "test.json")
    # A fresh reference cache: the first small check below pays for building it.
    env = {**os.environ, "PTB_CONTAMINATION_CACHE": str(work / "refcache"), "HARBOR_TELEMETRY": "0"}
    started = time.perf_counter()
    plants = write_corpus(corpus, args.mb, reference, args.planted)
    size = sum((corpus / n).stat().st_size for n in FILES)
    print(
        f"corpus: {size / 1e6:.0f} MB ({', '.join(FILES)}), {len(plants)} planted test items, "
        f"written in {time.perf_counter() - started:.0f} s; reference: GSM8K test, "
        f"{len(reference)} items"
    )
    ok = small_checks(work, reference, ref_path, env, args.small_runs)
    ok &= whole_corpus(corpus, ref_path, env, plants, size, args.naive_mb, work, reference)
    print(f"end: {uptime()}")
    if not os.environ.get("PTB_BENCH_KEEP"):
        shutil.rmtree(corpus)
    return 0 if ok else 1


def small_checks(work: Path, reference, ref_path: Path, env: dict, runs: int) -> bool:
    """Time checks of a small file (20 clean records and one planted); True when right."""
    train = (GSM8K / "train.jsonl").read_text().splitlines()[:20]
    item = reference[7]
    lines = [*train, json.dumps({"question": item.question, "answer": item.answer})]
    small = work / "small.jsonl"
    small.write_text("\n".join(lines) + "\n")
    args = ["--reference", str(ref_path), "--input", str(small), "--json"]
    ok = True
    for label, argv in (
        ("python -m (check_contamination.sh)", MODULE),
        ("ptb contamination check", PTB),
    ):
        times = []
        for _ in range(runs + (label.startswith("python") and 1)):
            report, wall, _cpu = run_command([*argv, *args], env)
            assert report is not None
            ok &= report["contaminated_test_items"] == [7]
            times.append(wall)
        if label.startswith("python"):
            print(f"small check, empty reference cache, {label}: {times.pop(0):.2f} s")
        print(
            f"small check ({small.stat().st_size / 1e3:.0f} kB), {label}: median "
            f"{statistics.median(times):.2f} s, max {max(times):.2f} s over {runs} runs "
            f"[target < 2 s: {'met' if max(times) < 2 else 'NOT met'}]; finds the planted item: {ok}"
        )
    return ok


def whole_corpus(corpus, ref_path, env, plants, size, naive_mb, work, reference) -> bool:
    """Time the command on the whole corpus and compare with the naive checker on a prefix."""
    ok = True
    per_core = 0.0
    cores = default_workers()
    for workers in sorted({1, cores}):
        argv = [*PTB, "--reference", str(ref_path), "--input", str(corpus), "--json"]
        report, wall, cpu = run_command([*argv, "--workers", str(workers)], env)
        assert report is not None
        hits, false = found(report, plants)
        ok &= hits == len(plants) and false == 0
        rate = size / 1e6 / wall
        per_core = rate if workers == 1 else per_core
        print(
            f"ptb contamination check, {workers} worker(s): {rate:6.1f} MB/s whole command "
            f"({wall:.1f} s wall; own timer {size / 1e6 / report['seconds']:.1f} MB/s; "
            f"{size / 1e6 / cpu:.1f} MB per CPU-second) = {rate / workers:.1f} MB/s per core; "
            f"planted found {hits}/{len(plants)}, false positives {false}"
        )
    print(
        f"per-core rate of the whole command target >= 50 MB/s: {'met' if per_core >= 50 else 'NOT met'}"
    )
    prefix = work / "prefix"
    write_prefix(corpus, prefix, naive_mb)
    prefix_size = sum(p.stat().st_size for p in prefix.iterdir())
    naive = naive_check(reference, [prefix])
    argv = [*PTB, "--reference", str(ref_path), "--input", str(prefix), "--json", "--workers", "1"]
    fast, wall, _ = run_command(argv, env)
    assert fast is not None
    naive_keys = sorted((Path(m.source).name, m.locator, m.test_index) for m in naive.matches)
    fast_keys = sorted(
        (Path(m["source"]).name, m["locator"], m["test_index"]) for m in fast["matches"]
    )
    same = naive_keys == fast_keys
    naive_rate = prefix_size / 1e6 / naive.seconds
    print(
        f"reference (naive pure-Python checker, same run): {naive_rate:.1f} MB/s on a "
        f"{prefix_size / 1e6:.1f} MB prefix ({naive.seconds:.1f} s); the command on it: "
        f"{'identical matches' if same else 'DIFFERENT matches'} ({len(fast_keys)})"
    )
    print(f"ratio, whole command 1 worker / naive: {per_core / naive_rate:.1f}x")
    return ok and same


if __name__ == "__main__":
    sys.exit(main())
