"""Checks that fail fast, with one clear line, before any slow step."""

from __future__ import annotations

from shutil import which

from posttrainbench.errors import RunError


def check_local_sandbox() -> None:
    """The local sandbox needs bubblewrap."""
    if which("bwrap") is None:
        raise RunError("bubblewrap (bwrap) is not installed; run `make demo` or `apt-get install bubblewrap`")


def check_judge(benchmark_id: str) -> None:
    """A judged benchmark's judge model and key must be set before a run starts."""
    from posttrainbench.benchmarks import get_benchmark
    from posttrainbench.benchmarks.llm_judge import JudgeConfigError

    bench = get_benchmark(benchmark_id)
    if not bench.uses_llm_judge:
        return
    try:
        bench.judge()
    except JudgeConfigError as exc:
        raise RunError(f"{benchmark_id} is scored by an LLM judge: {exc}") from None
