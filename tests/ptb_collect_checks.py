"""PostTrainBench's own scripts/collect.py (the pinned copy) on `ptb results export --layout ptb`,
checked cell by cell against `ptb results collect --policy ptb` on the same store."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import run_ptb

PINNED = Path(__file__).parent / "fixtures" / "posttrainbench"
BLANK = object()


def run_ptb_collect(data_dir: Path, work: Path) -> Path:
    """Run the pinned collect.py, unchanged, on *data_dir*; the directory of its CSVs.

    Its utils.py reads baselines.json beside itself: the pinned copy of the same commit
    (tests/fixtures/posttrainbench/README.md) goes there. It needs the standard library only."""
    scripts = work / "ptb-scripts"
    shutil.copytree(PINNED / "scripts", scripts)
    shutil.copy(PINNED / "baselines.json", scripts / "baselines.json")
    out = work / "ptb-csv"
    done = subprocess.run(
        [sys.executable, str(scripts / "collect.py"), "--data-dir", str(data_dir)]
        + ["--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def read_final_csvs(out: Path) -> dict[str, dict[tuple[str, str], str]]:
    """{method: {(benchmark, model column): cell text}} of every final_<method>.csv."""
    found: dict[str, dict[tuple[str, str], str]] = {}
    for path in sorted(out.glob("final_*.csv")):
        rows = list(csv.reader(path.open(newline="")))
        header = rows[0][1:]
        found[path.stem.removeprefix("final_")] = {
            (bench, row[0]): row[i + 1] for row in rows[1:] for i, bench in enumerate(header)
        }
    return found


def check_ptb_collect(store: Path, work: Path, agents: dict[str, str]) -> dict:
    """Export *store* in PostTrainBench's layout, run its collect.py, and assert that every
    cell of its final CSVs equals the leaderboard cell of `--policy ptb`. *agents* maps each
    leaderboard agent to the method name PostTrainBench gives it (stated by the caller, so
    the naming is checked too). Returns the CSV cells."""
    exported = run_ptb("results", "export", str(store), "--layout", "ptb", "-o", str(work / "ptb"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    csvs = read_final_csvs(run_ptb_collect(work / "ptb", work))
    collected = run_ptb("results", "collect", str(store), "--policy", "ptb", "-o", str(work / "b"))
    assert collected.returncode == 0, collected.stderr
    board = json.loads((work / "b" / "leaderboard.json").read_text())
    columns = _model_columns()
    assert set(csvs) == set(agents.values()), (sorted(csvs), agents)
    compared = 0
    for cell in board["cells"]:
        method = csvs[agents[cell["agent"]]]
        key = (cell["benchmark"], columns[cell["base_model"]])
        if key not in method:
            # Its grid is the method's own benchmarks x models; a cell outside it has no run.
            assert cell["source"] != "run", cell
            continue
        text = method[key]
        if cell["score"] is None:
            assert text == "", (key, text, cell)
        else:
            assert text != "" and float(text) == cell["score"], (key, text, cell)
        compared += 1
    assert compared == sum(len(m) for m in csvs.values())
    return csvs


def _model_columns() -> dict[str, str]:
    from posttrainbench.host.catalog import list_models

    return {m.id: m.model_id.partition("/")[2] for m in list_models()}
