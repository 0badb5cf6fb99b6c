"""Candidate commits: fetched from the agent's repository into the service's own bare
repository, and handed out as tar streams (:class:`ArchiveSource`) to be unpacked by
whoever uses them (see ``candidate_run``).

Nothing here runs in, or writes to, the agent's working tree, and root never reads it:
the only git process that touches the agent's repository is ``upload-pack``, started
(by our ``fetch``) as the user that owns that repository, so a link the agent plants in
``.git`` leads only where the agent itself may read. ``upload-pack`` never runs the
repository's hooks. Root's own git then reads only root's bare repository.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.service.shared.errors import CandidateError
from posttrainbench.service.shared.launcher_python import helper, launcher_python

_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-f]{4,39}$")
_REF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
# upload-pack runs as the repository's owner, who may differ from the git that starts it.
_UPLOAD_PACK = "git -c safe.directory=* upload-pack"
_GIT_TIMEOUT_S = 120
GIT_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


@dataclass(frozen=True)
class ArchiveSource:
    """A command (run by the trusted side) that writes one candidate's code to stdout as a tar."""

    argv: tuple[str, ...]
    label: str


def check_commit_spec(spec: str) -> str:
    """Accept a full 40-hex commit id or a branch/tag name (``HEAD``, ``main``, ``v1``).

    Abbreviated ids are refused: resolving them would mean running git in the agent's tree.
    """
    if _SHORT_SHA.match(spec):
        raise CandidateError(
            f"commit {spec!r} looks abbreviated: pass the full 40-hex commit id or a branch/tag name"
        )
    ok = bool(_FULL_SHA.match(spec)) or (
        bool(_REF_NAME.match(spec)) and ".." not in spec and not spec.endswith((".lock", "/", "."))
    )
    if not ok:
        raise CandidateError(
            f"commit {spec!r} must be a full 40-hex commit id or a branch/tag name"
        )
    return spec


def _git(*args: str, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", *args], input=input_bytes, capture_output=True, timeout=_GIT_TIMEOUT_S, env=GIT_ENV
    )


def _last_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {result.returncode}"


class CandidateRepo:
    """The service's own bare repository; each candidate is pinned under ``refs/ptb/candidates/<n>``."""

    def __init__(self, git_dir: Path):
        self.git_dir = Path(git_dir)

    def ensure(self) -> None:
        """Create the bare repository when it is missing."""
        if not (self.git_dir / "HEAD").exists():
            result = _git("init", "--bare", "--quiet", str(self.git_dir))
            if result.returncode != 0:
                raise CandidateError(
                    f"cannot create the candidate repository: {_last_line(result)}"
                )

    def fetch(self, source: Path, spec: str, ref: str) -> str:
        """Fetch commit *spec* of the repository at *source* into *ref*; return its commit id."""
        check_commit_spec(spec)
        self.ensure()
        result = _git(
            "--git-dir",
            str(self.git_dir),
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            f"--upload-pack={upload_pack_command(Path(source))}",
            os.path.abspath(source),
            f"+{spec}:{ref}",
        )
        if result.returncode != 0:
            raise CandidateError(
                f"cannot fetch commit {spec!r} from the agent's repository: {_last_line(result)}"
            )
        return self.resolve(ref)

    def resolve(self, ref: str) -> str:
        """The commit id *ref* points at."""
        result = _git(
            "--git-dir", str(self.git_dir), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"
        )
        if result.returncode != 0:
            raise CandidateError(f"{ref} is not a commit in the candidate repository")
        return result.stdout.decode().strip()

    def pin(self, sha: str, ref: str) -> None:
        """Point *ref* at *sha* (the candidate's permanent, unique name)."""
        result = _git("--git-dir", str(self.git_dir), "update-ref", ref, sha)
        if result.returncode != 0:
            raise CandidateError(f"cannot record {ref}: {_last_line(result)}")

    def delete_ref(self, ref: str) -> None:
        """Remove a temporary ref (missing is fine)."""
        _git("--git-dir", str(self.git_dir), "update-ref", "-d", ref)

    def source(self, rev: str) -> ArchiveSource:
        """Commit *rev* of this repository as a tar stream."""
        return git_source(self.git_dir, rev)


def repository_owner(source: Path) -> int:
    """The uid owning the agent's repository: its ``.git`` entry's, else the directory's (never
    following a link); the first non-root one wins, since that user may have planted links."""
    for path in (Path(source) / ".git", Path(source)):
        try:
            uid = os.lstat(path).st_uid
        except OSError:
            continue
        if uid != 0:
            return uid
    return 0


def upload_pack_command(source: Path) -> str:
    """The ``--upload-pack`` command: as the repository's owner when this process is root."""
    owner = repository_owner(source) if os.geteuid() == 0 else 0
    if owner == 0:
        return _UPLOAD_PACK
    try:
        gid = pwd.getpwuid(owner).pw_gid
    except KeyError:
        gid = owner
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    environment = " ".join(f"{k}={shlex.quote(v)}" for k, v in GIT_ENV.items())
    return (
        f"{setpriv} --reuid={owner} --regid={gid} --clear-groups --no-new-privs -- "
        f"env -i {environment} {_UPLOAD_PACK}"
    )


def git_source(git_dir: Path, rev: str) -> ArchiveSource:
    """``git archive`` of *rev* of *git_dir* (a bare repository or a ``.git`` directory root owns)."""
    return ArchiveSource(
        argv=(
            "git",
            "-c",
            "safe.directory=*",
            "--git-dir",
            str(git_dir),
            "archive",
            "--format=tar",
            rev,
        ),
        label=f"{rev} of {git_dir}",
    )


def directory_source(directory: Path) -> ArchiveSource:
    """A trusted directory's files (no top-level ``.git``) as a tar stream."""
    return ArchiveSource(
        argv=(launcher_python(), "-I", "-S", helper("tar_stream.py"), "pack", str(directory)),
        label=str(directory),
    )


def baseline_source(baseline: Path) -> ArchiveSource:
    """The baseline: its committed HEAD when it is a git repository, else the directory."""
    baseline = Path(baseline)
    if (baseline / ".git").exists():
        return git_source(baseline / ".git", "HEAD")
    if (baseline / "HEAD").is_file() and (baseline / "objects").is_dir():  # a bare repository
        return git_source(baseline, "HEAD")
    return directory_source(baseline)
