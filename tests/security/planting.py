"""What a hostile agent leaves in its trial directory for the host's readers to trip over.

`make_canary` puts a host secret outside the trial; `plant_host_links` fills a trial
directory (built by `tests.results_fixtures.write_trial`, or a real trial's) with links to
it, a hard link to it, a FIFO, a 10 GB sparse file and decoys, in every place the agent can
write: `agent/`, the artifacts (`final_model`, `code_snapshot`, both layouts), `verifier/`.
A reader that follows any of them puts the canary's text into what it writes or prints.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from posttrainbench.core.verdict import Judgement

SPARSE_BYTES = 10 * 2**30


@dataclass(frozen=True)
class Canary:
    """A host file and a host directory outside every trial; `text` must never leave them."""

    text: str
    file: Path
    dir: Path


def make_canary(where: Path) -> Canary:
    """A host secret under *where*: a file that parses as a Claude Code trace, and a directory
    that looks like a model, a snapshot, a session dir and a verdict dir, all holding the text."""
    text = f"PTB-HOST-CANARY-{uuid.uuid4().hex}"
    where.mkdir(parents=True, exist_ok=True)
    line = {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }
    file = where / "host_secret.txt"
    file.write_text(json.dumps(line) + "\n")
    folder = where / "host_dir"
    for sub in ("", "artifacts/final_model", "artifacts/code_snapshot", "projects/p"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"secret": text}))
    (folder / "artifacts" / "final_model" / "config.json").write_text(json.dumps({"secret": text}))
    (folder / "artifacts" / "code_snapshot" / "train.py").write_text(f"# {text}\n")
    (folder / "projects" / "p" / "s.jsonl").write_text(json.dumps(line) + "\n")
    # A clean verdict that is not this trial's, naming the canary, for a verdict link to borrow.
    Judgement(
        judge="contamination", flagged=False, decided_by="detector", justification=text
    ).write(folder)
    return Canary(text=text, file=file, dir=folder)


@dataclass
class Planted:
    """Where the attacks went (paths relative to the trial directory)."""

    links: list[str] = field(default_factory=list)
    hard_links: list[str] = field(default_factory=list)
    fifos: list[str] = field(default_factory=list)
    sparse: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[str]:
        """Every planted path."""
        return self.links + self.hard_links + self.fifos + self.sparse


def _link(trial: Path, relative: str, target: Path, planted: Planted) -> None:
    path = trial / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # a real trial's own (sessions/): kept aside
        path.rename(path.with_name(f"{path.name}.aside"))
    path.unlink(missing_ok=True)
    path.symlink_to(target)
    planted.links.append(relative)


def artifacts_of(trial: Path) -> str:
    """The artifacts layout in use: the local sandbox's copy, else Docker's mount."""
    copied = trial / "artifacts" / "logs" / "artifacts"
    return (
        "artifacts/logs/artifacts" if copied.is_dir() and not copied.is_symlink() else "artifacts"
    )


def plant_host_links(
    trial: Path,
    canary: Canary,
    *,
    final_model: Literal["link", "containing"] = "containing",
    sparse: bool = True,
) -> Planted:
    """Plant links to *canary*, a hard link to it, a FIFO and (with *sparse*) a 10 GB sparse file
    into *trial*'s agent-writable places; returns what went where.

    *final_model*: "link" makes `final_model` itself a link to a host directory; "containing"
    makes it a real directory holding links, a hard link, a FIFO and a sparse weight file.
    """
    planted = Planted()
    art = artifacts_of(trial)
    # agent/: the stream a reader ranks first, Harbor's conversion, sessions and re-prompt rounds.
    for name in (
        "agent/codex.txt",
        "agent/trajectory.json",
        "agent/gemini-cli.trajectory.jsonl",
        "agent/reprompt/round-1/claude-code.txt",
        "agent/zz-extra.jsonl",
    ):
        _link(trial, name, canary.file, planted)
    _link(trial, "agent/sessions", canary.dir, planted)
    _try_hard_link(trial, "agent/opencode.txt", canary.file, planted)
    _fifo(trial, "agent/gemini-cli.txt", planted)
    _fifo(trial, "agent/pipe.jsonl", planted)
    if sparse:
        _sparse(trial, "agent/huge.jsonl", planted)
    # verifier/: a borrowed clean verdict and a task spec from the host.
    _link(
        trial,
        "verifier/judgement_zzz.json",
        canary.dir / Judgement.filename("contamination"),
        planted,
    )
    _link(trial, "verifier/task.json", canary.file, planted)
    # Docker's layout: a link where the local sandbox keeps its copy, so a reader that
    # follows it takes the host's final_model and snapshot for the trial's.
    if art == "artifacts":
        _link(trial, "artifacts/logs", canary.dir, planted)
    # code_snapshot: a real directory holding links, a FIFO and a hard link.
    snap = f"{art}/code_snapshot"
    (trial / snap).mkdir(parents=True, exist_ok=True)
    _link(trial, f"{snap}/leak.py", canary.file, planted)
    _link(trial, f"{snap}/hostdir", canary.dir, planted)
    _fifo(trial, f"{snap}/pipe.py", planted)
    _try_hard_link(trial, f"{snap}/linked.py", canary.file, planted)
    model = f"{art}/final_model"
    if final_model == "link":
        _link(trial, model, canary.dir / "artifacts" / "final_model", planted)
    else:
        (trial / model).mkdir(parents=True, exist_ok=True)
        (trial / model / "tokenizer_config.json").write_text("{}")
        _link(trial, f"{model}/config.json", canary.dir / "config.json", planted)
        _link(trial, f"{model}/sub", canary.dir, planted)
        _try_hard_link(trial, f"{model}/chat_template.jinja", canary.file, planted)
        _fifo(trial, f"{model}/generation_config.json", planted)
        if sparse:
            _sparse(trial, f"{model}/model.safetensors", planted)
    return planted


def _try_hard_link(trial: Path, relative: str, target: Path, planted: Planted) -> None:
    path = trial / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    try:
        os.link(target, path)
    except OSError:  # another filesystem, or protected_hardlinks: the agent could not either
        return
    planted.hard_links.append(relative)


def _fifo(trial: Path, relative: str, planted: Planted) -> None:
    path = trial / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    planted.fifos.append(relative)


def _sparse(trial: Path, relative: str, planted: Planted) -> None:
    path = trial / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(SPARSE_BYTES)
    planted.sparse.append(relative)


def files_containing(root: Path, text: str) -> list[Path]:
    """Every regular file under *root* (links not followed) whose bytes contain *text*."""
    needle = text.encode()
    hits = []
    for current, _, files in os.walk(root):
        for name in files:
            path = Path(current) / name
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as handle:
                if needle in handle.read():
                    hits.append(path)
    return hits


def links_under(root: Path) -> list[Path]:
    """Every symbolic link under *root*."""
    return [
        Path(current) / name
        for current, dirs, files in os.walk(root)
        for name in dirs + files
        if (Path(current) / name).is_symlink()
    ]
