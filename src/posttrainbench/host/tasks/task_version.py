"""A compiled task's version: a content hash over what decides its score.

Two tasks with the same version score the same final model the same way: the verifier's
code and data (everything under the task's ``tests/``: test.sh, the sealed test set, the
evaluation and judge code, an operator's judge limits) and the task spec's scoring
settings. What only shapes the agent's run (hours, feedback split, resources, the agent's
environment) is left out, so changing the time budget keeps results comparable, while a
fixed scorer gets a new version. The verifier copies the file beside its results
(``verifier/task_version.json``), so every trial says which version scored it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.task.schemas import TaskSpec

TASK_VERSION_FILE = "task_version.json"
# The TaskSpec fields that decide a score (the rest shape the agent's run).
SCORING_FIELDS = (
    "benchmark",
    "model",
    "model_source",
    "gpus",
    "final_eval_limit",
    "seed",
    "score_base_model",
    "variant",
)
# The verifier's copy of the spec is hashed by its scoring fields only.
_SPEC_FILE = "task.json"
_PREFIX = "tv-"


class TaskVersion(BaseModel):
    """`tests/task_version.json` of a compiled task."""

    model_config = ConfigDict(extra="forbid")

    version: str = Field(pattern=r"^tv-[0-9a-f]{16}$", description="hash of what decides a score")
    compiled_at: datetime = Field(description="orders versions: the newest compile is current")
    posttrainbench: str = Field(description="the package version that compiled the task")
    inputs: dict[str, str] = Field(
        default_factory=dict,
        description="a hash of each group of what the version covers (the scoring settings, "
        "test.sh, each benchmark's data, each subpackage of the code): which changed",
    )

    def write(self, tests_dir: Path) -> Path:
        """Write the file into the task's `tests/` directory."""
        path = tests_dir / TASK_VERSION_FILE
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path


def scoring_settings(spec: TaskSpec) -> dict[str, object]:
    """The spec's fields that decide a score, by name."""
    return {name: getattr(spec, name) for name in SCORING_FIELDS}


def version_of(tests_dir: Path, spec: TaskSpec) -> str:
    """The version of a task whose verifier directory is *tests_dir*.

    Every regular file under it is hashed with its relative path (in sorted order, so
    the result does not depend on the directory listing's order), except the spec,
    which enters through its scoring settings, and the version file itself.
    """
    return _hash(tests_dir, spec)[0]


def _group(relative: str) -> str:
    """Which input group a file of `tests/` belongs to: `lib/posttrainbench/<zone>/<subpackage>`
    (a benchmark's own folder apart), `data/<benchmark>`, or the file itself."""
    parts = relative.split("/")
    if parts[:2] == ["lib", "posttrainbench"]:
        if parts[3:4] == ["benchmarks"] and len(parts) > 5:
            return "/".join(parts[:5])
        return "/".join(parts[:4]) if len(parts) > 4 else "/".join(parts[:3])
    if parts[0] in ("lib", "data") and len(parts) > 2:
        return "/".join(parts[:2])
    return relative


def _hash(tests_dir: Path, spec: TaskSpec) -> tuple[str, dict[str, str]]:
    digest = hashlib.sha256()
    settings = json.dumps(scoring_settings(spec), sort_keys=True).encode()
    digest.update(settings)
    groups: dict[str, hashlib._Hash] = {"settings": hashlib.sha256(settings)}
    for path in sorted(p for p in tests_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        relative = path.relative_to(tests_dir).as_posix()
        if relative in (_SPEC_FILE, TASK_VERSION_FILE) or "__pycache__" in path.parts:
            continue
        content = hashlib.sha256(path.read_bytes()).digest()
        for h in (digest, groups.setdefault(_group(relative), hashlib.sha256())):
            h.update(b"\0" + relative.encode() + b"\0")
            h.update(content)
    inputs = {name: h.hexdigest()[:12] for name, h in sorted(groups.items())}
    return _PREFIX + digest.hexdigest()[:16], inputs


def changed_inputs(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The input groups whose hash differs between two versions (added or removed too)."""
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def stamp(tests_dir: Path, spec: TaskSpec, package_version: str) -> TaskVersion:
    """Compute the version of a freshly compiled task and write it into *tests_dir*."""
    hashed, inputs = _hash(tests_dir, spec)
    version = TaskVersion(
        version=hashed,
        compiled_at=datetime.now(UTC),
        posttrainbench=package_version,
        inputs=inputs,
    )
    version.write(tests_dir)
    return version
