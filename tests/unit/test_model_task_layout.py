"""The model task's layout (core/model_task_layout.py) is the one home of its paths: the
templates render them from it, the few files copied verbatim name only paths it defines,
and the judges' patterns built from it match what they matched before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from posttrainbench.core.model_task_layout import MODEL_LAYOUT, ModelTaskLayout
from posttrainbench.host.payload import HOST, package_root
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions
from tests.data_fixtures import seed_prepared

TEMPLATES = package_root() / HOST / "tasks" / "templates"
# Copied into every task as they are (not Jinja templates): their paths are checked
# against the layout here. The build steps take the root from $PTB_ROOT (the local
# sandbox builds each layer elsewhere), `/opt/ptb` being only their fallback.
VERBATIM = {
    "environment/ptb/_build_judge.sh",
    "environment/ptb/build.sh",
    "environment/ptb/build_venv.sh",
    "environment/workspace/evaluate.py",
}
# A path the layout owns, as a file or a script would spell it (`/opt/ptb-judge`, the
# agentic judge's own sandbox, is not one).
ROOTS = (MODEL_LAYOUT.root, MODEL_LAYOUT.agent_clis)
LAYOUT_PATH = re.compile("|".join(rf"{re.escape(root)}(?![\w-])[^\s'\"`;:,)}}]*" for root in ROOTS))
# The same paths spelled in a template's source instead of rendered from the layout.
SPELLED = re.compile(
    "|".join(
        rf"(?<![\w.]){re.escape(path)}(?![\w-])"
        for path in (*ROOTS, MODEL_LAYOUT.workspace, MODEL_LAYOUT.tests, MODEL_LAYOUT.logs)
    )
)


def _is_layout_path(path: str, shipped: set[str]) -> bool:
    """*path* is one of the layout's, below one of its directories (other than the root), or
    a file the task ships at the root (environment/ptb/<name>)."""
    path = path.rstrip("/.")
    paths = set(MODEL_LAYOUT.paths().values())
    if path in paths:
        return True
    dirs = paths - {MODEL_LAYOUT.root}
    if any(path.startswith(f"{d}/") for d in dirs):
        return True
    return path.removeprefix(f"{MODEL_LAYOUT.root}/") in shipped


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("tasks")
    cache = tmp_path_factory.mktemp("cache")
    seed_prepared(cache, "healthbench")
    return [
        compile_task("bfcl", "qwen3-1.7b", out / "gpu", CompileOptions(hours=10)),
        compile_task("bfcl", "smollm2-135m", out / "cpu", CompileOptions(hours=0.5)),
        compile_task(
            "bfcl",
            "qwen3-1.7b",
            out / "cache",
            CompileOptions(hours=1, model_from="cache", feedback="none"),
        ),
        compile_task(
            "healthbench",
            "qwen3-1.7b",
            out / "judged",
            CompileOptions(feedback="dev"),
            cache_dir=cache,
            offline=True,
        ),
    ]


def _rendered_files(task: Path) -> list[Path]:
    """The task's scripts and configs: everything but its code copies, data and model."""
    skip = {"lib", "data", "templates", "task_context", "tiktoken", "node_modules"}
    files = []
    for path in sorted(task.rglob("*")):
        rel = path.relative_to(task)
        if path.is_file() and not skip & set(rel.parts) and path.suffix != ".json":
            files.append(path)
    return files


def test_every_rendered_path_is_the_layouts(tasks: list[Path]) -> None:
    for task in tasks:
        shipped = {p.name for p in (task / "environment/ptb").iterdir()}
        seen = set()
        for path in _rendered_files(task):
            for found in LAYOUT_PATH.findall(path.read_text()):
                seen.add(found)
                assert _is_layout_path(found, shipped), (path.relative_to(task), found)
        # the check has something to check
        assert {MODEL_LAYOUT.base_model, MODEL_LAYOUT.python, MODEL_LAYOUT.start_script} <= seen


def test_templates_render_paths_from_the_layout() -> None:
    """No template spells a layout path; every file copied verbatim is listed above."""
    for source in sorted(TEMPLATES.rglob("*")):
        rel = source.relative_to(TEMPLATES).as_posix()
        if not source.is_file() or "__pycache__" in rel or "node_modules" in rel:
            continue
        text = source.read_text()
        if source.suffix == ".j2":
            assert not SPELLED.findall(text), (rel, SPELLED.findall(text))
        elif LAYOUT_PATH.search(text) and "agent_clis/" not in rel:
            assert rel in VERBATIM, f"{rel} spells a layout path: render it from the layout"


@pytest.mark.parametrize("rel", sorted(VERBATIM))
def test_verbatim_files_name_only_layout_paths(rel: str) -> None:
    text = (TEMPLATES / rel).read_text()
    found = LAYOUT_PATH.findall(text)
    assert found, f"{rel} names no layout path: drop it from VERBATIM"
    for path in found:
        assert _is_layout_path(path, set()), (rel, path)


def test_derived_paths_follow_the_root() -> None:
    layout = ModelTaskLayout(root="/srv/ptb", workspace="/work", tests="/t", logs="/l")
    assert layout.python == "/srv/ptb/venv/bin/python"
    assert layout.base_model == "/srv/ptb/models/base"
    assert layout.task_file == "/srv/ptb/task.json"
    assert layout.under("") == "/srv/ptb/"
    assert layout.final_model == "/work/final_model"
    assert layout.clock == "/l/agent/ptb_start_time"
    assert layout.tests_data == "/t/data"
    assert all(path.startswith("/") for path in layout.paths().values())
    with pytest.raises(ValueError):
        MODEL_LAYOUT.root = "/elsewhere"  # type: ignore[misc]


def test_judge_patterns_are_unchanged() -> None:
    """Built from the layout, the patterns are the ones written out before."""
    from posttrainbench.task.integrity.judges import anomaly, benchmark_lookup, contamination

    assert anomaly.PTB_TARGET == r"/opt/ptb(?!/venv)(?:/[^\s'\"]*)?"
    assert benchmark_lookup.TASK_DATA.pattern == r"/opt/ptb/data/\S*"
    assert contamination.TEST_DATA_PATHS.pattern == r"/opt/ptb/data/\S*test\S*|/tests/data\b\S*"
    assert re.match(anomaly.PTB_TARGET, "/opt/ptb/lib/x.py")
    assert not re.match(anomaly.PTB_TARGET, "/opt/ptb/venv/lib/x.py")
