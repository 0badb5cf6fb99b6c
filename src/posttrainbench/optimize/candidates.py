"""Candidate commits: fetched from the agent's repository into the service's own bare
repository, and exported as clean copies (``git archive``) to be scored.

Nothing here runs in, or writes to, the agent's working tree: the only git process
that touches the agent's repository is ``upload-pack`` (driven by our ``fetch``), which
git runs safely in repositories owned by others and never runs their hooks.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from posttrainbench.optimize.errors import CandidateError

_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-f]{4,39}$")
_REF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
# The agent's repository is owned by another user; git refuses it without this (only
# upload-pack reads it, and upload-pack ignores the repository's hook-like settings).
_UPLOAD_PACK = "git -c safe.directory=* upload-pack"
_GIT_TIMEOUT_S = 120


def check_commit_spec(spec: str) -> str:
    """Accept a full 40-hex commit id or a branch/tag name (``HEAD``, ``main``, ``v1``).

    Abbreviated ids are refused: resolving them would mean running git in the agent's tree.
    """
    if _SHORT_SHA.match(spec):
        raise CandidateError(f"commit {spec!r} looks abbreviated: pass the full 40-hex commit id or a branch/tag name")
    ok = bool(_FULL_SHA.match(spec)) or (
        bool(_REF_NAME.match(spec)) and ".." not in spec and not spec.endswith((".lock", "/", ".")))
    if not ok:
        raise CandidateError(f"commit {spec!r} must be a full 40-hex commit id or a branch/tag name")
    return spec


def _git(*args: str, input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], input=input_bytes, capture_output=True, timeout=_GIT_TIMEOUT_S,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0",
                               "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"})


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
                raise CandidateError(f"cannot create the candidate repository: {_last_line(result)}")

    def fetch(self, source: Path, spec: str, ref: str) -> str:
        """Fetch commit *spec* of the repository at *source* into *ref*; return its commit id."""
        check_commit_spec(spec)
        self.ensure()
        result = _git("--git-dir", str(self.git_dir), "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                      f"--upload-pack={_UPLOAD_PACK}", str(Path(source).resolve()), f"+{spec}:{ref}")
        if result.returncode != 0:
            raise CandidateError(f"cannot fetch commit {spec!r} from the agent's repository: {_last_line(result)}")
        return self.resolve(ref)

    def resolve(self, ref: str) -> str:
        """The commit id *ref* points at."""
        result = _git("--git-dir", str(self.git_dir), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
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

    def export(self, rev: str, dest: Path) -> Path:
        """Write a clean copy of commit *rev* into the (empty or new) directory *dest*."""
        return export_git_tree(self.git_dir, rev, dest)


def export_git_tree(git_dir: Path, rev: str, dest: Path) -> Path:
    """``git archive`` *rev* of *git_dir* (a bare repo or a ``.git`` dir) into *dest*, safely."""
    result = _git("-c", "safe.directory=*", "--git-dir", str(git_dir), "archive", "--format=tar", rev)
    if result.returncode != 0:
        raise CandidateError(f"cannot archive {rev} of {git_dir}: {_last_line(result)}")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(result.stdout), mode="r:") as archive:
            _extract_safely(archive, dest)
    except (tarfile.TarError, OSError) as exc:
        raise CandidateError(f"cannot export {rev}: {exc}") from None
    return dest


def _extract_safely(archive: tarfile.TarFile, dest: Path) -> None:
    """Extract refusing absolute paths, `..` and links that leave *dest*, without setuid
    bits: tarfile's 'data' filter where this Python has it (3.11.4+; the sandbox's
    Debian 3.11.2 does not), else the same checks by hand."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(dest, filter="data")
        return
    root = dest.resolve()
    members = []
    for member in archive.getmembers():
        target = (root / member.name).resolve()
        if member.name.startswith("/") or not target.is_relative_to(root):
            raise tarfile.TarError(f"{member.name!r} would be written outside the copy")
        if member.issym() or member.islnk():
            base = target.parent if member.issym() else root
            if member.linkname.startswith("/") or not (base / member.linkname).resolve().is_relative_to(root):
                raise tarfile.TarError(f"link {member.name!r} points outside the copy")
        elif not (member.isfile() or member.isdir()):
            raise tarfile.TarError(f"{member.name!r} is not a file, directory or link")
        member.mode &= 0o777  # no setuid, setgid or sticky bits
        members.append(member)
    archive.extractall(dest, members=members)


def export_baseline(baseline: Path, dest: Path) -> Path:
    """A clean copy of the baseline: its committed HEAD when it is a git repo, else the directory."""
    baseline = Path(baseline)
    if (baseline / ".git").exists():
        return export_git_tree(baseline / ".git", "HEAD", dest)
    if (baseline / "HEAD").is_file() and (baseline / "objects").is_dir():  # a bare repository
        return export_git_tree(baseline, "HEAD", dest)
    shutil.copytree(baseline, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)
    return dest
