"""A dev-mode agent never gets the sealed test set through the package it is given.

HealthBench's test set ships inside the package (`task/benchmarks/healthbench/data/`, the
file its source prepares from). The task's payload (`/opt/ptb/lib` in the agent's
environment) is a copy of the package's in-sandbox code: were a benchmark's `data/`
copied with it, an agent in `--feedback dev` (or `none`) could read every scored
conversation. Every file of the agent's environment is searched for the sealed test
items' ids, gzip members decompressed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from posttrainbench.host.data.prepare import prepare_benchmark
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions


def _texts(root: Path):
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            yield path, data


def test_the_agent_s_environment_holds_no_scored_item(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    prepare_benchmark("healthbench", cache, offline=True)  # shipped: no download
    task = compile_task(
        "healthbench",
        "qwen3-1.7b",
        tmp_path / "tasks",
        CompileOptions(hours=1, feedback="dev"),  # "none" copies the same payload
        cache_dir=cache,
        offline=True,
    )
    sealed = [
        json.loads(line)["id"]
        for line in (task / "tests/data/healthbench/test.jsonl").read_text().splitlines()
    ]
    assert len(sealed) > 150
    needles = [item.encode() for item in sealed]
    leaks = [
        str(path.relative_to(task))
        for path, data in _texts(task / "environment")
        if any(needle in data for needle in needles)
    ]
    assert leaks == []
