"""Candidates: fetched into the service's own repository under unique refs (upload-pack as
the repository's owner), handed out as tar streams and unpacked clean."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from posttrainbench.service.shared import tar_stream
from posttrainbench.service.shared.candidate_run import CodeRefused, unpack
from posttrainbench.service.shared.candidates import (
    CandidateRepo,
    baseline_source,
    check_commit_spec,
)
from posttrainbench.service.shared.config import CandidateLimits
from posttrainbench.service.shared.errors import CandidateError
from posttrainbench.service.shared.registry import Registry
from tests.optimize_fixtures import PERFECT, WRONG, commit, git, needs_root, open_dir

LIMITS = CandidateLimits()


def _export(source, dest: Path) -> Path:
    dest.mkdir()
    unpack(source, dest, None, LIMITS)
    return dest


@pytest.fixture
def agent(tmp_path):
    repo = tmp_path / "agent"
    first = commit(repo, {"solve.py": WRONG}, "baseline")
    second = commit(repo, {"solve.py": PERFECT, "notes.md": "better"}, "better")
    return repo, first, second


def _registry(tmp_path) -> Registry:
    return Registry(
        tmp_path / "state" / "candidates.json", CandidateRepo(tmp_path / "state" / "candidates.git")
    )


def test_fetch_by_sha_branch_and_head_pins_unique_refs(tmp_path, agent):
    repo, first, second = agent
    (tmp_path / "state").mkdir()
    registry = _registry(tmp_path)
    one = registry.register(repo, first)
    two = registry.register(repo, "HEAD")
    again = registry.register(repo, "main")  # same commit as HEAD: same candidate
    assert (one.id, one.sha, one.ref) == (1, first, "refs/ptb/candidates/1")
    assert (two.id, two.sha) == (2, second) and again.id == 2
    refs = git(
        tmp_path / "state" / "candidates.git", "for-each-ref", "--format=%(refname) %(objectname)"
    )
    assert refs.splitlines() == [
        f"refs/ptb/candidates/1 {first}",
        f"refs/ptb/candidates/2 {second}",
    ]  # no temp refs left
    assert [c.id for c in registry.snapshot().candidates] == [1, 2]


@pytest.mark.parametrize(
    "spec", ["--upload-pack=touch /tmp/x", "HEAD~1", "a..b", "main:refs/x", "", "abc123"]
)
def test_bad_commit_specs_are_one_clear_error(spec):
    with pytest.raises(CandidateError, match="full 40-hex commit id or a branch/tag name"):
        check_commit_spec(spec)


def test_unknown_commit_or_repo_is_a_clear_error(tmp_path, agent):
    repo, _, _ = agent
    (tmp_path / "state").mkdir()
    registry = _registry(tmp_path)
    with pytest.raises(
        CandidateError, match="cannot fetch commit 'nope' from the agent's repository"
    ) as info:
        registry.register(repo, "nope")
    assert "\n" not in str(info.value)
    with pytest.raises(CandidateError, match="cannot fetch"):
        registry.register(repo, "0" * 40)
    with pytest.raises(CandidateError, match="cannot fetch"):
        registry.register(tmp_path / "missing", "HEAD")
    assert registry.snapshot().candidates == []


def test_export_is_a_clean_copy_and_never_touches_the_agent_tree(tmp_path, agent):
    repo, first, second = agent
    (repo / "untracked.txt").write_text("scratch")
    (repo / "solve.py").write_text("# uncommitted edit\n")
    before = sorted(os.listdir(repo))
    store = CandidateRepo(tmp_path / "svc.git")
    sha = store.fetch(repo, first, "refs/ptb/candidates/1")
    out = _export(store.source(sha), tmp_path / "copy")
    assert sorted(os.listdir(out)) == [
        "solve.py"
    ]  # committed files only, no .git, no untracked file
    assert (out / "solve.py").read_text() == WRONG
    assert (
        sorted(os.listdir(repo)) == before
        and (repo / "solve.py").read_text() == "# uncommitted edit\n"
    )
    assert git(repo, "rev-parse", "HEAD") == second


def test_export_refuses_a_symlink_leaving_the_copy(tmp_path):
    repo = tmp_path / "agent"
    commit(repo, {"solve.py": PERFECT})
    os.symlink("/etc/passwd", repo / "leak")
    sha = commit(repo, {}, "add link")
    store = CandidateRepo(tmp_path / "svc.git")
    store.fetch(repo, sha, "refs/ptb/candidates/1")
    with pytest.raises(CodeRefused, match="points outside the copy"):
        _export(store.source(sha), tmp_path / "copy")


def test_baseline_export_from_git_head_or_plain_dir(tmp_path, agent):
    repo, _, _ = agent
    (repo / "solve.py").write_text("# uncommitted\n")
    assert (
        _export(baseline_source(repo), tmp_path / "a") / "solve.py"
    ).read_text() == PERFECT  # committed HEAD
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "solve.py").write_text(WRONG)
    assert sorted(os.listdir(_export(baseline_source(plain), tmp_path / "b"))) == ["solve.py"]


def _give_to_nobody(tree: Path) -> None:
    for root, dirs, files in os.walk(tree):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, 65534, 65534)


@needs_root
def test_fetch_from_a_repo_owned_by_another_user(tmp_path, agent):
    repo, _, second = agent
    with open_dir() as public:  # upload-pack runs as the owner: it must reach its repository
        owned = public / "owned"
        shutil.copytree(repo, owned, symlinks=True)
        _give_to_nobody(owned)
        store = CandidateRepo(tmp_path / "svc.git")
        assert store.fetch(owned, "main", "refs/ptb/candidates/1") == second


@needs_root
def test_links_the_agent_plants_in_dot_git_lead_only_where_the_agent_may_read(tmp_path, agent):
    """``.git/shallow`` linked to a root-only file: root's upload-pack would read it and die
    printing its first line ("bad shallow line: ..."); the owner's cannot read it, and the
    fetch goes on without it."""
    repo, _, second = agent
    with open_dir() as public:
        secret = public / "hidden-labels.txt"
        secret.write_text('{"id": "test-0", "answer": "hidden-label-4242"}\n')
        secret.chmod(0o600)  # root's only
        owned = public / "owned"
        shutil.copytree(repo, owned, symlinks=True)
        os.symlink(secret, owned / ".git" / "shallow")
        _give_to_nobody(owned)
        store = CandidateRepo(tmp_path / "svc.git")
        assert store.fetch(owned, "main", "refs/ptb/candidates/1") == second


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return buf.getvalue()


def _member(name: str, data: bytes = b"x", **fields) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def _unpack(
    data: bytes, dest: Path, max_bytes: int = 1 << 20, max_files: int = 100
) -> tuple[int, str]:
    dest.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            tar_stream.__file__,
            "unpack",
            str(dest),
            "--max-bytes",
            str(max_bytes),
            "--max-files",
            str(max_files),
        ],
        input=data,
        capture_output=True,
    )
    return done.returncode, done.stderr.decode().strip().splitlines()[-1]


def test_unpack_keeps_a_clean_copy_and_refuses_what_a_commit_never_has(tmp_path) -> None:
    good = _tar(
        _member("pkg/run.sh", mode=0o4755),
        _member("pkg/link", type=tarfile.SYMTYPE, linkname="run.sh"),
    )
    assert _unpack(good, tmp_path / "ok")[0] == 0
    assert (tmp_path / "ok" / "pkg" / "run.sh").stat().st_mode & 0o7777 == 0o755  # setuid dropped
    assert os.readlink(tmp_path / "ok" / "pkg" / "link") == "run.sh"
    bad = {
        "escape": _tar(_member("pkg/evil", type=tarfile.SYMTYPE, linkname="../../../etc/passwd")),
        "absolute": _tar(_member("pkg/evil", type=tarfile.SYMTYPE, linkname="/etc/passwd")),
        "dotdot": _tar(_member("../outside.txt")),
        "through_link": _tar(_member("d", type=tarfile.SYMTYPE, linkname="."), _member("d/x")),
        "device": _tar(_member("dev", type=tarfile.CHRTYPE)),
        "hardlink": _tar(_member("a"), _member("b", type=tarfile.LNKTYPE, linkname="a")),
    }
    for name, data in bad.items():
        code, line = _unpack(data, tmp_path / name)
        assert code == tar_stream.REFUSED and "refused" in line, (name, line)
    assert not (tmp_path / "outside.txt").exists()


def test_unpack_stops_a_tar_bomb_at_the_limits(tmp_path) -> None:
    many = _tar(*(_member(f"f{i}") for i in range(50)))
    assert _unpack(many, tmp_path / "many", max_files=10) == (
        tar_stream.LIMIT_EXCEEDED,
        "the candidate's code is too large to unpack: more than 10 files",
    )
    big = _tar(_member("zeros", b"\0" * 4096))
    code, line = _unpack(big, tmp_path / "big", max_bytes=1000)
    assert code == tar_stream.LIMIT_EXCEEDED and "more than 1000 bytes" in line
    assert not (tmp_path / "big" / "zeros").exists()
