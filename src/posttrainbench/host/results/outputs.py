"""Write a leaderboard as files: `leaderboard.json` and `agents.csv`, `cells.csv`, `runs.csv`."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import OutputDirError
from posttrainbench.host.results.table import Leaderboard


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return str(value)


def _csv_text(rows: Iterable[BaseModel], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        data = row.model_dump()
        flat = {**data, **{f"score:{k}": v for k, v in data.pop("per_benchmark", {}).items()}}
        writer.writerow([_cell_text(flat.get(c)) for c in columns])
    return buffer.getvalue()


def write_leaderboard(board: Leaderboard, out_dir: Path) -> list[Path]:
    """Write the four files into *out_dir*; each appears whole or not at all."""
    from posttrainbench.host.results.table import AgentSummary, Cell, RunRow

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot create {out_dir}: {exc.strerror or exc}") from None
    agent_cols = [c for c in AgentSummary.model_fields if c != "per_benchmark"]
    agent_cols += [f"score:{b}" for b in board.benchmarks]
    files = {
        "agents.csv": _csv_text(board.agents, agent_cols),
        "cells.csv": _csv_text(board.cells, list(Cell.model_fields)),
        "runs.csv": _csv_text(board.runs, list(RunRow.model_fields)),
        "leaderboard.json": board.model_dump_json(indent=2) + "\n",
    }
    written = []
    try:
        for name, text in files.items():
            write_text_atomic(out_dir / name, text)
            written.append(out_dir / name)
    except OSError as exc:
        raise OutputDirError(f"cannot write into {out_dir}: {exc.strerror or exc}") from None
    return written
