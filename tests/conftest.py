"""Fixtures shared by the host-side test tiers (unit, security, integration).

pytest also loads this file for the task tier (tests/task), which runs on the task
environment's Python 3.11 without Harbor: keep it free of 3.12-only syntax and import
Harbor and ``posttrainbench.host.envs`` (through ``tests.sandbox_support``) inside the fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.sandbox_support import MakeEnv


@pytest.fixture(scope="module")
def sandbox_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One PTB_CACHE_DIR shared by a test module, so the venv is built once."""
    cache = tmp_path_factory.mktemp("ptb-cache")
    previous = os.environ.get("PTB_CACHE_DIR")
    os.environ["PTB_CACHE_DIR"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("PTB_CACHE_DIR", None)
    else:
        os.environ["PTB_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def task_env_dir(tmp_path_factory: pytest.TempPathFactory, sandbox_cache: Path) -> Path:
    """A shared task environment dir (empty requirements, a tiny build.sh)."""
    from tests.sandbox_support import write_task_env

    root = tmp_path_factory.mktemp("task")
    return write_task_env(
        root, build_sh="mkdir -p $PTB_ROOT/models && echo base > $PTB_ROOT/models/base\n"
    )


@pytest.fixture(scope="module")
def nested_env_dir(task_env_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared task environment (same layer, so no rebuild) declaring nested_sandboxes."""
    import shutil

    from posttrainbench.host.envs.environment_needs import NEEDS_FILE_NAME, EnvironmentNeeds

    root = tmp_path_factory.mktemp("nested-task")
    shutil.copytree(task_env_dir.parent, root, dirs_exist_ok=True)
    env_dir = root / task_env_dir.name
    EnvironmentNeeds(nested_sandboxes=True).dump(env_dir / NEEDS_FILE_NAME)
    return env_dir


@pytest.fixture(scope="session")
def mode_b_task_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One layer cache for the compiled Mode B tasks of a run: their venv (Python >= 3.12,
    Harbor and everything pinned, about a minute to install) is built once."""
    return tmp_path_factory.mktemp("mode-b-cache")


@pytest.fixture
def make_env(tmp_path: Path, task_env_dir: Path) -> MakeEnv:
    """Factory for environment instances of one trial (``session`` picks the role)."""
    from tests.sandbox_support import env_factory

    return env_factory(tmp_path / "trial", task_env_dir)


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The host file ($PTB_TEST_COUNTER) that the build steps of
    ``tests.unit.test_env_layer_sandbox.write_layered_env`` append each built layer's name to."""
    path = tmp_path / "builds.txt"
    path.touch()
    monkeypatch.setenv("PTB_TEST_COUNTER", str(path))
    return path


# Tests that run candidates share the machine-wide pool of candidate uids (and kill every
# process of a uid when done; RLIMIT_NPROC counts a uid's processes machine-wide): under
# `pytest -n` (make test, make test-fast) they run in one worker.
SHARED_UID_POOL_MODULES = (
    "test_optimize_",
    "test_judges_model",
    "test_agent_task_",
    "test_service_",
    "test_proxy_agent",
    "test_trusted_python_isolation",
    "test_environment_reset",
)

UID_POOL_GROUP = "candidate_uids"

# The longest tests of the host tier (minutes each, measured on 2 cores), longest first:
# `pytest -n` hands out work in collection order, so these start at once instead of
# landing on one worker at the end. A substring of the node id, in this order.
LONGEST_FIRST = (
    "test_run_e2e.py::test_demo",
    "test_agent_task_mode_b_e2e.py",
    "test_run_e2e.py::test_harbor_cli_runs_a_generated_task",
    "test_agent_clis.py",
    "test_agentic_judges_trial.py",
    "test_model_task_runtime.py",
    "test_eval_cli.py",
    "test_judges_hostile_trial.py",
    "test_sweep_local.py",
)


def _rank(item: pytest.Item) -> int:
    for rank, key in enumerate(LONGEST_FIRST):
        if key in item.nodeid:
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: the longest tests first, and the tests that share the candidate uid
    pool in one xdist group."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    items.sort(key=_rank)  # stable: the rest keeps its collection order
    # An xdist worker runs with dist "no" and xdist's own loadgroup flag.
    grouped = bool(getattr(config.option, "loadgroup", False))
    for item in items:
        if Path(str(item.path)).name.startswith(SHARED_UID_POOL_MODULES):
            item.add_marker(pytest.mark.xdist_group(UID_POOL_GROUP))
            if grouped:
                _join_group(item)


def _join_group(item: pytest.Item) -> None:
    """Give *item* the ``@group`` node-id suffix that xdist's loadgroup schedules by.

    xdist 3.8 sets it by assigning ``item._nodeid``, which pytest 9.2 no longer reads (the
    id lives in ``item._id``): the groups silently did not hold, and candidates of two
    workers, issued the same uid, killed each other. Set where pytest reads it.
    """
    if "@" in item.nodeid or not hasattr(item, "_id"):  # an older pytest: xdist sets it
        return
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{UID_POOL_GROUP}")
