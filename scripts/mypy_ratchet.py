"""Type-check ratchet: mypy's error count per file may only go down.

Usage: python scripts/mypy_ratchet.py [--update]

Runs mypy (configured in pyproject.toml) and compares its errors per file with
scripts/mypy_baseline.json. A file with more errors than its baseline fails the check and
its errors are printed; a file with fewer is reported, and `--update` writes the lower
counts (it never raises one). Exit 0 when nothing grew, 1 otherwise, 2 on bad use.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "scripts" / "mypy_baseline.json"
_ERROR = re.compile(r"^(?P<file>[^:\s]+\.py):\d+: error: ")


def mypy_errors() -> list[str]:
    """mypy's error lines for the configured files."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash)
        sys.stderr.write(run.stdout + run.stderr)
        raise SystemExit(2)
    return [line for line in run.stdout.splitlines() if _ERROR.match(line)]


def main(argv: list[str]) -> int:
    """Compare mypy's errors with the baseline (and lower it with --update)."""
    if argv not in ([], ["--update"]):
        print("usage: python scripts/mypy_ratchet.py [--update]", file=sys.stderr)
        return 2
    errors = mypy_errors()
    now = Counter(m["file"] for line in errors if (m := _ERROR.match(line)))
    baseline: dict[str, int] = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
    grew = sorted(f for f, n in now.items() if n > baseline.get(f, 0))
    for path in grew:
        print(f"{path}: {now[path]} mypy errors, baseline {baseline.get(path, 0)}:")
        print("\n".join(f"  {line}" for line in errors if line.startswith(path + ":")))
    fell = sorted(f for f, n in baseline.items() if now.get(f, 0) < n)
    if fell and "--update" in argv:
        lowered = {f: min(n, now.get(f, 0)) for f, n in baseline.items()}
        BASELINE.write_text(json.dumps({f: n for f, n in sorted(lowered.items()) if n}, indent=1))
        print(f"baseline lowered for {len(fell)} file(s)")
    elif fell:
        print(f"{len(fell)} file(s) below their baseline: run with --update to lower it")
    total = sum(now.values())
    print(f"mypy: {total} errors (baseline {sum(baseline.values())}); grew in {len(grew)} file(s)")
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
