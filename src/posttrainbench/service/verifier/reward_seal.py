"""The reward is published last, by root, into a directory only root can write, and sealed.

``publish`` copies final scoring's ``final.json`` and then ``reward.json`` from its
root-only staging directory into the verifier's output, and records the reward's digest
in the service's state (root-only). ``check`` (the verifier's very last step) refuses a
``reward.json`` that is not a regular root-owned file, is writable by others, or differs
from the seal: it puts the sealed reward back and flags the run (``judgement_isolation.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import stat
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.nofollow import open_regular
from posttrainbench.core.verdict import Evidence, Judgement

REWARD = "reward.json"
FINAL = "final.json"
SEAL = "reward_seal.json"


class Seal(BaseModel):
    """What was published (kept in the root-only state directory)."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    text: str


def publish(staging: Path, out_dir: Path, state_dir: Path) -> Seal:
    """Copy ``final.json`` then ``reward.json`` (last) into *out_dir*; seal the reward."""
    staging, out_dir = Path(staging), Path(out_dir)
    final = staging / FINAL
    if final.is_file():
        write_text_atomic(out_dir / FINAL, final.read_text(encoding="utf-8"))
    text = (staging / REWARD).read_text(encoding="utf-8")
    seal = Seal(sha256=hashlib.sha256(text.encode()).hexdigest(), text=text)
    write_text_atomic(Path(state_dir) / SEAL, seal.model_dump_json() + "\n", mode=0o600)
    write_text_atomic(out_dir / REWARD, text)
    return seal


def problem(out_dir: Path, seal: Seal) -> str | None:
    """Why the published reward cannot be reported (None: it is the sealed one, root's)."""
    path = Path(out_dir) / REWARD
    try:
        info = os.lstat(path)
    except OSError:
        return "reward.json is missing"
    if not stat.S_ISREG(info.st_mode):
        return "reward.json is not a regular file"
    if info.st_uid != 0 and os.geteuid() == 0:
        return f"reward.json is owned by uid {info.st_uid}, not root"
    if stat.S_IMODE(info.st_mode) & (stat.S_IWGRP | stat.S_IWOTH):
        return "reward.json is writable by others"
    try:
        fd, _ = open_regular(path)
    except OSError:  # swapped since the lstat
        return "reward.json is not a regular file"
    with os.fdopen(fd, "rb") as handle:
        if hashlib.sha256(handle.read()).hexdigest() != seal.sha256:
            return "reward.json changed after final scoring wrote it"
    return None


def check(out_dir: Path, state_dir: Path) -> str | None:
    """Restore the sealed reward when the published one cannot be reported, and flag the run."""
    seal = Seal.model_validate_json((Path(state_dir) / SEAL).read_text(encoding="utf-8"))
    found = problem(out_dir, seal)
    if found is None:
        return None
    path = Path(out_dir) / REWARD
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # whatever it holds, it is not a reward
    write_text_atomic(path, seal.text)  # replaces a link or a file, never writes through it
    flag = (
        Judgement.read(Path(out_dir) / Judgement.filename("isolation"))
        if (Path(out_dir) / Judgement.filename("isolation")).is_file()
        else None
    )
    evidence = Evidence(detector="reward_seal", flagged=True, detail=found, location=str(path))
    if flag is None:
        flag = Judgement(
            judge="isolation",
            flagged=True,
            decided_by="detector",
            justification=found,
            evidence=[evidence],
        )
    else:
        flag = flag.model_copy(
            update={
                "flagged": True,
                "evidence": [*flag.evidence, evidence],
                "justification": f"{flag.justification}; {found}",
            }
        )
    flag.write(out_dir)
    return found


def main(argv: list[str] | None = None) -> int:
    """``publish --staging S --out-dir O --state-dir T`` or ``check --out-dir O --state-dir T``."""
    parser = argparse.ArgumentParser(
        prog="python -m posttrainbench.service.verifier.reward_seal", description=__doc__
    )
    parser.add_argument("action", choices=("publish", "check"))
    parser.add_argument("--staging", type=Path)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.action == "publish":
        if args.staging is None:
            parser.error("publish needs --staging")
        publish(args.staging, args.out_dir, args.state_dir)
        return 0
    try:
        found = check(args.out_dir, args.state_dir)
    except (OSError, ValueError) as exc:
        print(f"error: cannot check the reward: {exc}", file=sys.stderr)
        return 2
    if found:
        print(
            f"reward refused ({found}): the sealed reward is restored and the run flagged",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
