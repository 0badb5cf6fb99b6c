"""Where a Harbor trial keeps its agent's traces and the artifacts the collect hook handed over.

Harbor's installed agents write under the trial's `agent/` directory: the agent's own
stream (`claude-code.txt`, `codex.txt`, `gemini-cli.txt`, `opencode.txt`, tee'd from the
CLI's stdout and stderr), Harbor's ATIF conversion `trajectory.json`, Gemini's session
copy `gemini-cli.trajectory.json(l)`, and the session files under `sessions/` (Claude
Code `projects/*/<id>.jsonl`, Codex `YYYY/MM/DD/rollout-*.jsonl`). Harbor's own agents
(terminus-2) write `trajectory.json` directly.

The agent wrote all of it, so it is read through `safe_fs`: a link, FIFO, device, hard
link or sparse file among the candidates is refused and listed, never opened.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from posttrainbench.core.nofollow import Refused, kind_of
from posttrainbench.core.safe_fs import FileRead, SafeDir
from posttrainbench.task.integrity.traces.detect import is_known_format

# Best first: the agent's own stream is the most direct record of what it ran and what it
# cost; Harbor's conversion comes next; session files and anything else last.
AGENT_STREAMS = ("claude-code.txt", "codex.txt", "opencode.txt", "gemini-cli.txt")
CONVERTED = ("trajectory.json",)
GEMINI_SESSIONS = ("gemini-cli.trajectory.json", "gemini-cli.trajectory.jsonl")
OTHER_PATTERNS = ("*.jsonl", "*.json", "*.txt")
SNIFF_BYTES = 256 * 1024
MAX_DOCUMENT_BYTES = 64 * 2**20  # a whole-document (.json) trace is sniffed whole up to this
MAX_TRACE_BYTES = 1024 * 2**20  # the most of one trace file that is read or copied
MAX_SESSION_DEPTH = 8
MAX_CANDIDATES = 2_000  # files looked at per trial: a directory of millions only costs this much
# What a scan keeps of the files it read whole, for the export to store without reading them
# again: a trial of thousands of session files costs this much memory, the rest is re-read.
MAX_KEPT_BYTES = 16 * 2**20
TRIAL_LOG = "trial.log"  # Harbor writes it in every trial directory when the trial starts


@dataclass
class TraceScan:
    """A trial's trace files (paths relative to the directory scanned), best first, and the
    candidates refused, as '<path>: <why>'.

    *reads*: the trace files the scan read whole (those of at most SNIFF_BYTES), by path, so
    that a caller storing them writes these very bytes instead of reading each file again.
    """

    files: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    reads: dict[str, FileRead] = field(default_factory=dict)
    kept_bytes: int = 0


def _read_head(root: SafeDir, relative: str, st: os.stat_result) -> FileRead:
    """What a sniff of the file reads (*st*: its lstat from the listing)."""
    limit = MAX_DOCUMENT_BYTES if relative.endswith(".json") else SNIFF_BYTES
    return root.read_file(relative, limit, lstat=st)


def _known(read: FileRead) -> bool:
    """Whether the head of a file is a known trace format."""
    return is_known_format(read.data.decode("utf-8", errors="replace"))


class _Scanner:
    """Ranks the candidate files of one agent directory."""

    def __init__(self, root: SafeDir, agent: str):
        self.root = root
        self.agent = agent
        self.scan = TraceScan()
        self.ranked: list[tuple[int, str]] = []
        # The first candidate kept whatever its format (which only ranks it among others),
        # not sniffed yet: most trials have one trace, and a sniff decodes its head. Sniffed
        # once a second candidate comes (only one read is held for it).
        self.pending: tuple[int, str, FileRead] | None = None
        self.seen: set[str] = set()

    def rel(self, *names: str) -> str:
        return "/".join(n for n in (self.agent, *names) if n)

    def consider(self, relative: str, st, rank: int, keep_unknown: bool) -> None:
        if relative in self.seen:
            return
        if len(self.seen) == MAX_CANDIDATES:
            self.scan.refused.append(
                f"{relative}: over the cap of {MAX_CANDIDATES} trace candidates: "
                "it and the rest not looked at"
            )
        self.seen.add(relative)
        if len(self.seen) > MAX_CANDIDATES:
            return
        if not stat.S_ISREG(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                self.scan.refused.append(f"{relative}: {kind_of(st.st_mode)}")
            return
        if st.st_size == 0:
            return
        try:
            read = _read_head(self.root, relative, st)
        except Refused as exc:
            self.scan.refused.append(str(exc))
            return
        except (OSError, ValueError):
            return
        if keep_unknown and not self.ranked and self.pending is None:
            self.pending = (rank, relative, read)
        else:
            self._settle()
            known = _known(read)
            if not known and not keep_unknown:
                return
            self.ranked.append((rank if known else rank + 10, relative))
        size = read.st.st_size
        if (
            read.whole is not None
            and size <= SNIFF_BYTES
            and self.scan.kept_bytes + size <= MAX_KEPT_BYTES
        ):
            self.scan.reads[relative] = read
            self.scan.kept_bytes += size

    def _settle(self) -> None:
        """Rank the pending candidate: a known format first, an unknown one after."""
        if self.pending is not None:
            rank, relative, read = self.pending
            self.pending = None
            self.ranked.append((rank if _known(read) else rank + 10, relative))

    def listing(self, *names: str) -> dict:
        try:
            return dict(self.root.entries(self.rel(*names)))
        except Refused as exc:
            self.scan.refused.append(str(exc))
        except OSError:
            pass
        return {}

    def sessions(self, names: tuple[str, ...], depth: int) -> None:
        """Every `*.jsonl` under `sessions/`, through real directories only."""
        for name, st in self.listing(*names).items():
            here = (*names, name)
            if stat.S_ISDIR(st.st_mode) and depth < MAX_SESSION_DEPTH:
                self.sessions(here, depth + 1)
            elif fnmatchcase(name, "*.jsonl"):
                self.consider(self.rel(*here), st, 3, keep_unknown=False)

    def run(self) -> TraceScan:
        top = self.listing()
        for name in AGENT_STREAMS:
            if name in top:
                self.consider(self.rel(name), top[name], 0, keep_unknown=True)
        # The re-prompting wrapper keeps each earlier round's transcript (the CLIs overwrite theirs).
        if "reprompt" in top and stat.S_ISDIR(top["reprompt"].st_mode):
            for round_name, st in self.listing("reprompt").items():
                if fnmatchcase(round_name, "round-*") and stat.S_ISDIR(st.st_mode):
                    for name, file_st in self.listing("reprompt", round_name).items():
                        if fnmatchcase(name, "*.txt"):
                            self.consider(
                                self.rel("reprompt", round_name, name),
                                file_st,
                                0,
                                keep_unknown=True,
                            )
        for rank, names in ((1, CONVERTED), (2, GEMINI_SESSIONS)):
            for name in names:
                if name in top:
                    self.consider(self.rel(name), top[name], rank, keep_unknown=False)
        for name, st in top.items():
            if any(fnmatchcase(name, pattern) for pattern in OTHER_PATTERNS):
                self.consider(self.rel(name), st, 3, keep_unknown=False)
        if "sessions" in top:
            if stat.S_ISDIR(top["sessions"].st_mode):
                self.sessions(("sessions",), 0)
            else:
                self.scan.refused.append(
                    f"{self.rel('sessions')}: {kind_of(top['sessions'].st_mode)}"
                )
        if self.pending is not None:  # the only candidate: no need to know its format
            self.ranked.append(self.pending[:2])
        self.ranked.sort()
        self.scan.files = [relative for _, relative in self.ranked]
        return self.scan


def scan_trial_traces(root: SafeDir) -> TraceScan:
    """The trace files under a trial directory's `agent/` (or under the directory itself, when
    it has no `agent/`), best first, read without following any link.

    A stream file of a known agent whose content is not a known format (Gemini's default
    text output) still counts, after the parseable ones.
    """
    agent = root.lstat("agent")
    if agent is not None and not stat.S_ISDIR(agent.st_mode):
        return TraceScan(refused=[f"agent: {kind_of(agent.st_mode)}"])
    return _Scanner(root, "agent" if agent is not None else "").run()


def plain_agent_log(root: SafeDir) -> str | None:
    """For an agent that left no trace in a known format (oracle, nop, a custom agent): its
    largest plain `agent/*.txt` or `*.log` file, as a readable record of what it did."""
    try:
        entries = dict(root.entries("agent"))
    except OSError:  # nofollow.Refused included: no agent directory, or not a real one
        return None
    logs = [
        (st.st_size, name)
        for name, st in entries.items()
        # One name only: a hard link may be a host file's other name (safe_fs refuses it).
        if stat.S_ISREG(st.st_mode)
        and st.st_nlink == 1
        and st.st_size > 0
        and name.endswith((".txt", ".log"))
    ]
    return f"agent/{max(logs)[1]}" if logs else None


def find_trial_traces(trial_dir: Path) -> list[Path]:
    """The trace files of a Harbor trial directory (or of its `agent/` directory), best first."""
    trial_dir = Path(trial_dir)
    try:
        root = SafeDir.open(trial_dir)
    except OSError:
        return []
    with root:
        return [trial_dir / relative for relative in scan_trial_traces(root).files]


def artifacts_subdir(root: SafeDir) -> str:
    """Where below the trial directory its `final_model/`, `code_snapshot/` and `data_files/` are.

    Harbor mounts `/logs/artifacts` at `<trial>/artifacts/` where the environment can
    (Docker); otherwise (the local sandbox) it copies the directory to
    `<trial>/artifacts/logs/artifacts/`, as its `manifest.json` records. A link is never
    taken for the copied layout.
    """
    copied = "artifacts/logs/artifacts"
    return copied if root.is_dir(copied) else "artifacts"


def trial_artifacts_dir(trial_dir: Path) -> Path:
    """The directory holding a trial's `final_model/`, `code_snapshot/` and `data_files/`."""
    try:
        with SafeDir.open(Path(trial_dir)) as root:
            return Path(trial_dir) / artifacts_subdir(root)
    except OSError:
        return Path(trial_dir) / "artifacts"
