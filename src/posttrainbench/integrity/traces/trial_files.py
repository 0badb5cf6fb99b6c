"""Where a Harbor trial keeps its agent's traces and the artifacts the collect hook handed over.

Harbor's installed agents write under the trial's `agent/` directory: the agent's own
stream (`claude-code.txt`, `codex.txt`, `gemini-cli.txt`, `opencode.txt`, tee'd from the
CLI's stdout and stderr), Harbor's ATIF conversion `trajectory.json`, Gemini's session
copy `gemini-cli.trajectory.json(l)`, and the session files under `sessions/` (Claude
Code `projects/*/<id>.jsonl`, Codex `YYYY/MM/DD/rollout-*.jsonl`). Harbor's own agents
(terminus-2) write `trajectory.json` directly.
"""

from __future__ import annotations

from pathlib import Path

from posttrainbench.integrity.traces.detect import detect_format

# Best first: the agent's own stream is the most direct record of what it ran and what it
# cost; Harbor's conversion comes next; session files and anything else last.
AGENT_STREAMS = ("claude-code.txt", "codex.txt", "opencode.txt", "gemini-cli.txt")
CONVERTED = ("trajectory.json",)
SNIFF_BYTES = 256 * 1024


def _sniff(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError:
        return None
    if path.suffix == ".json":  # a whole document: sniff all of it (ATIF files are not huge)
        try:
            head = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    return detect_format(head)


def find_trial_traces(trial_dir: Path) -> list[Path]:
    """The trace files of a Harbor trial directory (or of its `agent/` directory), best first.

    A stream file of a known agent whose content is not a known format (Gemini's default
    text output) still counts, after the parseable ones.
    """
    trial_dir = Path(trial_dir)
    agent_dir = trial_dir / "agent" if (trial_dir / "agent").is_dir() else trial_dir
    if not agent_dir.is_dir():
        return []
    ranked: list[tuple[int, str, Path]] = []
    seen: set[Path] = set()

    def consider(path: Path, rank: int, keep_unknown: bool) -> None:
        if path in seen or not path.is_file() or path.stat().st_size == 0:
            return
        seen.add(path)
        fmt = _sniff(path)
        if fmt is None and not keep_unknown:
            return
        ranked.append((rank if fmt is not None else rank + 10, str(path), path))

    for name in AGENT_STREAMS:
        consider(agent_dir / name, 0, keep_unknown=True)
    # The re-prompting wrapper keeps each earlier round's transcript (the CLIs overwrite theirs).
    for path in sorted(agent_dir.glob("reprompt/round-*/*.txt")):
        consider(path, 0, keep_unknown=True)
    for name in CONVERTED:
        consider(agent_dir / name, 1, keep_unknown=False)
    for name in ("gemini-cli.trajectory.json", "gemini-cli.trajectory.jsonl"):
        consider(agent_dir / name, 2, keep_unknown=False)
    for pattern in ("*.jsonl", "*.json", "*.txt", "sessions/**/*.jsonl"):
        for path in sorted(agent_dir.glob(pattern)):
            consider(path, 3, keep_unknown=False)
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [path for _, _, path in ranked]


def trial_artifacts_dir(trial_dir: Path) -> Path:
    """The directory holding a trial's `final_model/`, `code_snapshot/` and `data_files/`.

    Harbor mounts `/logs/artifacts` at `<trial>/artifacts/` where the environment can
    (Docker); otherwise (the local sandbox) it copies the directory to
    `<trial>/artifacts/logs/artifacts/`, as its `manifest.json` records.
    """
    copied = Path(trial_dir) / "artifacts" / "logs" / "artifacts"
    return copied if copied.is_dir() else Path(trial_dir) / "artifacts"
