"""A benchmark is one plugin: adding one is adding one folder (docs/adding-a-benchmark.md).

The toy plugin in tests/fixtures/toy_benchmark is copied into a copy of the package, and
the real `ptb` (run from that copy) lists it, imports its data, compiles its task and
scores with it inside the task's own payload; the judges and the leaderboard know it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.host.tasks.compiler import AGENT_REFERENCE_NAME
from posttrainbench.task.benchmarks.plugin import PLUGIN_FILE, BenchmarkPlugin, plugins

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "tests" / "fixtures" / "toy_benchmark"
MODEL = "smollm2-135m"


def test_every_benchmark_folder_is_a_complete_plugin() -> None:
    folders = [
        p.parent
        for p in (ROOT / "src" / "posttrainbench" / "task" / "benchmarks").glob("*/__init__.py")
        if p.parent.name != "__pycache__"
    ]
    assert {f.name for f in folders} == {p.folder for p in plugins().values()}
    for plugin in plugins().values():
        assert plugin.load("evaluator")().id == plugin.id
        assert plugin.load("source")().benchmark_id == plugin.id
        assert plugin.context_text()


def test_a_plugin_file_with_an_unknown_field_is_refused() -> None:
    raw = json.loads((TOY / PLUGIN_FILE).read_text())
    with pytest.raises(ValueError, match="extra"):
        BenchmarkPlugin.model_validate({**raw, "weigth": 2.0})


def _ptb(package_root: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_root), "PTB_CACHE_DIR": str(cache)}
    code = "import sys; from posttrainbench.host.cli.app import main; sys.argv[0] = 'ptb'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def with_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package with the toy plugin as its eighth benchmark folder."""
    root = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "src" / "posttrainbench", root / "posttrainbench", ignore=ignore)
    shutil.copytree(TOY, root / "posttrainbench" / "task" / "benchmarks" / "toyqa", ignore=ignore)
    return root


def test_one_folder_adds_a_benchmark_end_to_end(with_toy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    listed = _ptb(with_toy, cache, "list", "benchmarks", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "toyqa" in {b["id"] for b in json.loads(listed.stdout)}

    rows = tmp_path / "test.jsonl"
    questions = [{"question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(12)]
    rows.write_text("".join(json.dumps(q) + "\n" for q in questions))
    imported = _ptb(with_toy, cache, "data", "import", "toyqa", str(rows))
    assert imported.returncode == 0, imported.stderr

    out = tmp_path / "tasks"
    generated = _ptb(
        with_toy,
        cache,
        "tasks",
        "generate",
        "-b",
        "toyqa",
        "-M",
        MODEL,
        "--offline",
        "-o",
        str(out),
    )
    assert generated.returncode == 0, generated.stderr
    task = out / f"toyqa-{MODEL}"
    context = (task / "environment" / "workspace" / "task_context" / "README.md").read_text()
    assert "Toy QA asks short questions" in context
    reference = json.loads((task / "environment/ptb/data" / AGENT_REFERENCE_NAME).read_text())
    assert {"question": "What is 3 plus 3?", "answer": "6"} in reference

    # The task's own payload scores with the toy evaluator (what its verifier imports).
    lib = task / "tests" / "lib"
    score = subprocess.run(
        [
            sys.executable,
            "-c",
            "from posttrainbench.task.benchmarks import get_benchmark\n"
            "from posttrainbench.task.benchmarks.base import Sample\n"
            "b = get_benchmark('toyqa'); s = Sample(id='x', category='toy', "
            "data={'question': 'q', 'answer': '6'})\n"
            "print(b.score(s, '6\\nbecause').score, b.score(s, '7').score)",
        ],
        env={**os.environ, "PYTHONPATH": str(lib)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert score.stdout.split() == ["1.0", "0.0"], score.stderr

    # The leaderboard weighs it and finds its published baseline; the judges look for it.
    code = (
        "from posttrainbench.host.results.reference_scores import load_weights\n"
        "from posttrainbench.host.catalog.baselines import list_baselines\n"
        "from posttrainbench.task.integrity.judges.patterns import lookup_table\n"
        "print(load_weights()['toyqa'], [b.score for b in list_baselines() "
        "if b.benchmark == 'toyqa'], lookup_table()[1]['toyqa'].names)"
    )
    known = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(with_toy)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert known.stdout.strip() == "0.5 [0.5] ['toyqa', 'toy qa']", known.stderr
