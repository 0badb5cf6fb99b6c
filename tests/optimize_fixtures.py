"""Builders for the agent-task (``posttrainbench.service``) tests: git repos, datasets,
solver programs and configs (imported explicitly, not a conftest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from posttrainbench.service.shared.config import AgentTaskConfig, parse_config

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not IS_ROOT, reason="needs root: only a root service switches to the candidate user"
)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def solver(rule: str, extra: str = "") -> str:
    """A ``solve.py`` answering "What is A + B?" questions with the Python expression *rule* over a, b."""
    return f"""import json, re, sys
{extra}
for line in sys.stdin:
    item = json.loads(line)
    a, b = map(int, re.findall(r"-?\\d+", item["question"])[:2])
    print(json.dumps({{"id": item["id"], "answer": str({rule})}}))
"""


PERFECT = solver("a + b")
WRONG = solver("-1")
PARTIAL = solver("a + b if a % 2 == 0 else -1")  # right on even a only


def git(repo: Path, *args: str) -> str:
    """Run git in *repo*; return stdout (fails the test on error)."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=GIT_ENV
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str = "change") -> str:
    """Write *files* into *repo* (creating it as a git repo if needed), commit, return the commit id."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def rows(prefix: str, count: int, start: int = 0) -> list[dict[str, str]]:
    """Samples "What is A + B?" with ids ``<prefix>-<i>``."""
    return [
        {
            "id": f"{prefix}-{i}",
            "question": f"What is {i} + {i * 3 + 1}?",
            "answer": str(i + i * 3 + 1),
        }
        for i in range(start, start + count)
    ]


def write_dataset(root: Path, splits: dict[str, list[dict[str, str]]]) -> Path:
    """Write ``<split>.jsonl`` files into *root*."""
    root.mkdir(parents=True, exist_ok=True)
    for name, items in splits.items():
        (root / f"{name}.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


def config_dict(**overrides: Any) -> dict[str, Any]:
    """A valid config mapping (viewable train, aggregate dev, hidden test, auto_best on dev)."""
    data: dict[str, Any] = {
        "name": "toy-adder",
        "baseline": "baseline",
        "dataset": "data",
        "splits": {
            "train": {"tier": "viewable", "max_runs": 50, "max_samples": 1000},
            "dev": {"tier": "aggregate", "max_runs": 20, "max_samples": 200, "min_samples": 4},
            "test": {"tier": "hidden"},
        },
        "reward": {
            "mode": "auto_best",
            "selection_split": "dev",
            "top_k": 2,
            "targets": [{"split": "test", "key": "reward"}],
        },
        "secrets": ["PTB_TEST_SECRET"],
        "timeouts": {"per_sample_s": 5, "per_eval_s": 20},
        "concurrency": 4,
        "scoring": {"mode": "A", "entry_command": "python3 solve.py"},
    }
    data.update(overrides)
    return data


def make_task(root: Path, baseline: str = PARTIAL, **overrides: Any) -> AgentTaskConfig:
    """Dataset, a plain-directory baseline and a config under *root* (8 train, 8 dev, 6 test, 2 extra)."""
    write_dataset(
        root / "data",
        {
            "train": rows("train", 8),
            "dev": rows("dev", 8, 100),
            "test": rows("test", 6, 200),
            "extra": rows("extra", 4, 300),
        },
    )
    (root / "baseline").mkdir(parents=True, exist_ok=True)
    (root / "baseline" / "solve.py").write_text(baseline)
    return parse_config(config_dict(**overrides), root)


@contextmanager
def open_dir() -> Iterator[Path]:
    """A world-traversable temp dir (pytest's tmp_path is 0700, which would hide a leak from the candidate user)."""
    path = Path(tempfile.mkdtemp(prefix="ptb-opt-test-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
