"""`bench/collect/run.py` refuses bad arguments with one line and exit 2, writing nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO


@pytest.mark.parametrize("args", [["--trials", "0"], ["--keep", "{kept}"]])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "earlier.txt").write_text("an earlier run's")  # trials added here would mix
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "collect" / "run.py"), "--trials", "3"]
        + [a.format(kept=kept) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert [p.name for p in kept.iterdir()] == ["earlier.txt"]
