"""Locate and read BFCL v4 data files shipped in the ``bfcl-eval`` package.

The package is installed with ``--no-deps`` (data only); importing ``bfcl_eval`` itself
would pull heavy dependencies, so we locate its directory with ``importlib.util.find_spec``
of the top-level package without executing submodules.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

DATA_DIR_ENV = "PTB_BFCL_DATA_DIR"  # override: a folder with BFCL_v4_*.json + possible_answer/


class BfclDataMissingError(FileNotFoundError):
    """bfcl-eval is not installed and no data dir override was given."""


def bfcl_data_dir() -> Path:
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclDataMissingError(
            "BFCL data not found: pip install --no-deps bfcl-eval, or set " + DATA_DIR_ENV
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_category(category: str = "simple_python") -> list[dict]:
    """Questions of one category joined with their ``ground_truth``, in file order."""
    root = bfcl_data_dir()
    name = f"BFCL_v4_{category}.json"
    questions = _read_jsonl(root / name)
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(root / "possible_answer" / name)}
    rows = []
    for q in questions:
        if q["id"] not in answers:
            raise ValueError(f"{name}: no possible answer for {q['id']}")
        rows.append({**q, "ground_truth": answers[q["id"]]})
    return rows
