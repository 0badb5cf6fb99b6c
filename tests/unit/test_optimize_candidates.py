"""Candidates: fetched into the service's own repository under unique refs, exported clean."""

from __future__ import annotations

import os
import shutil

import pytest

from posttrainbench.optimize.candidates import CandidateRepo, check_commit_spec, export_baseline
from posttrainbench.optimize.errors import CandidateError
from posttrainbench.optimize.registry import Registry
from tests.optimize_fixtures import PERFECT, WRONG, commit, git, needs_root


@pytest.fixture
def agent(tmp_path):
    repo = tmp_path / "agent"
    first = commit(repo, {"solve.py": WRONG}, "baseline")
    second = commit(repo, {"solve.py": PERFECT, "notes.md": "better"}, "better")
    return repo, first, second


def _registry(tmp_path) -> Registry:
    return Registry(tmp_path / "state" / "candidates.json", CandidateRepo(tmp_path / "state" / "candidates.git"))


def test_fetch_by_sha_branch_and_head_pins_unique_refs(tmp_path, agent):
    repo, first, second = agent
    (tmp_path / "state").mkdir()
    registry = _registry(tmp_path)
    one = registry.register(repo, first)
    two = registry.register(repo, "HEAD")
    again = registry.register(repo, "main")  # same commit as HEAD: same candidate
    assert (one.id, one.sha, one.ref) == (1, first, "refs/ptb/candidates/1")
    assert (two.id, two.sha) == (2, second) and again.id == 2
    refs = git(tmp_path / "state" / "candidates.git", "for-each-ref", "--format=%(refname) %(objectname)")
    assert refs.splitlines() == [f"refs/ptb/candidates/1 {first}", f"refs/ptb/candidates/2 {second}"]  # no temp refs left
    assert [c.id for c in registry.snapshot().candidates] == [1, 2]


@pytest.mark.parametrize("spec", ["--upload-pack=touch /tmp/x", "HEAD~1", "a..b", "main:refs/x", "", "abc123"])
def test_bad_commit_specs_are_one_clear_error(spec):
    with pytest.raises(CandidateError, match="full 40-hex commit id or a branch/tag name"):
        check_commit_spec(spec)


def test_unknown_commit_or_repo_is_a_clear_error(tmp_path, agent):
    repo, _, _ = agent
    (tmp_path / "state").mkdir()
    registry = _registry(tmp_path)
    with pytest.raises(CandidateError, match="cannot fetch commit 'nope' from the agent's repository") as info:
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
    out = store.export(sha, tmp_path / "copy")
    assert sorted(os.listdir(out)) == ["solve.py"]  # committed files only, no .git, no untracked file
    assert (out / "solve.py").read_text() == WRONG
    assert sorted(os.listdir(repo)) == before and (repo / "solve.py").read_text() == "# uncommitted edit\n"
    assert git(repo, "rev-parse", "HEAD") == second


def test_export_refuses_a_symlink_leaving_the_copy(tmp_path):
    repo = tmp_path / "agent"
    commit(repo, {"solve.py": PERFECT})
    os.symlink("/etc/passwd", repo / "leak")
    sha = commit(repo, {}, "add link")
    store = CandidateRepo(tmp_path / "svc.git")
    store.fetch(repo, sha, "refs/ptb/candidates/1")
    with pytest.raises(CandidateError, match="cannot export"):
        store.export(sha, tmp_path / "copy")


def test_baseline_export_from_git_head_or_plain_dir(tmp_path, agent):
    repo, _, _ = agent
    (repo / "solve.py").write_text("# uncommitted\n")
    assert (export_baseline(repo, tmp_path / "a") / "solve.py").read_text() == PERFECT  # committed HEAD
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "solve.py").write_text(WRONG)
    assert sorted(os.listdir(export_baseline(plain, tmp_path / "b"))) == ["solve.py"]


@needs_root
def test_fetch_from_a_repo_owned_by_another_user(tmp_path, agent):
    repo, _, second = agent
    owned = tmp_path / "owned"
    shutil.copytree(repo, owned)
    for root, dirs, files in os.walk(owned):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, 65534, 65534)
    store = CandidateRepo(tmp_path / "svc.git")
    assert store.fetch(owned, "main", "refs/ptb/candidates/1") == second


def test_export_without_tarfiles_data_filter_still_refuses_escapes(tmp_path, monkeypatch) -> None:
    """Debian bookworm's Python 3.11.2 (the sandbox's) has no tarfile 'data' filter."""
    import io
    import tarfile

    from posttrainbench.optimize.candidates import _extract_safely

    monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def archive(*members: tarfile.TarInfo) -> tarfile.TarFile:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for member in members:
                tar.addfile(member, io.BytesIO(b"x") if member.isfile() else None)
        buf.seek(0)
        return tarfile.open(fileobj=buf)

    script = tarfile.TarInfo("pkg/run.sh")
    script.size, script.mode = 1, 0o4755
    inside = tarfile.TarInfo("pkg/link")
    inside.type, inside.linkname = tarfile.SYMTYPE, "run.sh"
    _extract_safely(archive(script, inside), tmp_path / "ok")
    assert (tmp_path / "ok" / "pkg" / "run.sh").stat().st_mode & 0o7777 == 0o755  # setuid dropped
    assert (tmp_path / "ok" / "pkg" / "link").resolve() == (tmp_path / "ok" / "pkg" / "run.sh").resolve()
    escape = tarfile.TarInfo("pkg/evil")
    escape.type, escape.linkname = tarfile.SYMTYPE, "../../../etc/passwd"
    dotdot = tarfile.TarInfo("../outside.txt")
    dotdot.size = 1
    for bad in (escape, dotdot):
        with pytest.raises(tarfile.TarError):
            _extract_safely(archive(bad), tmp_path / "bad")
    assert not (tmp_path / "outside.txt").exists()
