"""Stage size-budgeted copies of what the agent left in /app, for later judging.

Two kinds of copy, each with a manifest (``MANIFEST.json``) of what was kept and what
was skipped, and why:

- the code snapshot (default): code and small text files. Weight files, data files,
  caches and the final model are left out; a file over the per-file cap is skipped,
  and copying stops at the total cap.
- the data files (``--data``): training-like data (jsonl, json, parquet, csv, tsv,
  txt, arrow) for the contamination judge, under a generous total cap. Model and
  checkpoint directories and their metadata files are left out; small files are taken
  first, so one huge file cannot crowd out many small ones.

Usage: python -m posttrainbench.task.sandbox.snapshot --src /app --dest DIR [--data]
           [--max-file-bytes N] [--max-total-bytes N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from posttrainbench.core.weights import BINARY_DATA_SUFFIXES, CHECKPOINT_SUFFIXES, WEIGHT_SUFFIXES

# Weights and large binary data: a code snapshot leaves them out.
SKIPPED_SUFFIXES = frozenset((*WEIGHT_SUFFIXES, *BINARY_DATA_SUFFIXES))
SKIPPED_DIRS = frozenset(
    {"final_model", "__pycache__", ".git", ".cache", "node_modules", ".venv", "venv", "wandb"}
)
DATA_SUFFIXES = frozenset({".jsonl", ".json", ".parquet", ".csv", ".tsv", ".txt", ".arrow"})
MODEL_METADATA_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "merges.txt",
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
        "adapter_config.json",
        "preprocessor_config.json",
        "chat_template.json",
        "MANIFEST.json",
    }
)
DEFAULT_DATA_MAX_TOTAL_BYTES = 2 * 1024**3


def snapshot(src: Path, dest: Path, max_file_bytes: int, max_total_bytes: int) -> dict[str, Any]:
    """Copy code files from src to dest within the caps; return the manifest."""
    kept: list[str] = []
    skipped: dict[str, str] = {}
    total = 0
    dest.mkdir(parents=True, exist_ok=True)
    for path, rel in _files(src, skipped):
        if path.is_symlink() or not path.is_file():
            skipped[rel] = "not a regular file"
            continue
        size = path.stat().st_size
        if path.suffix.lower() in SKIPPED_SUFFIXES:
            skipped[rel] = "weights or data file"
        elif size > max_file_bytes:
            skipped[rel] = f"over the per-file cap ({size} bytes)"
        elif total + size > max_total_bytes:
            skipped[rel] = "over the total cap"
        else:
            _copy(path, dest / rel)
            kept.append(rel)
            total += size
    return _write_manifest(dest, kept, skipped, total, max_file_bytes, max_total_bytes)


def is_model_dir(path: Path, files: list[str]) -> bool:
    """A directory holding a model or checkpoint: config.json next to weight files."""
    return "config.json" in files and any(
        Path(f).suffix.lower() in CHECKPOINT_SUFFIXES for f in files
    )


def collect_data_files(
    src: Path, dest: Path, max_file_bytes: int, max_total_bytes: int
) -> dict[str, Any]:
    """Copy training-like data files from src to dest within the caps; return the manifest.

    Files are taken smallest first (then by path), so the cap drops the biggest ones.
    """
    skipped: dict[str, str] = {}
    candidates: list[tuple[int, str, Path]] = []
    dest.mkdir(parents=True, exist_ok=True)
    for path, rel in _files(src, skipped, skip_model_dirs=True):
        if path.suffix.lower() not in DATA_SUFFIXES:
            continue  # not data: not listed, the code snapshot covers it
        if path.name in MODEL_METADATA_NAMES:
            skipped[rel] = "model metadata"
        elif path.is_symlink() or not path.is_file():
            skipped[rel] = "not a regular file"
        else:
            candidates.append((path.stat().st_size, rel, path))
    kept: list[str] = []
    total = 0
    for size, rel, path in sorted(candidates):
        if size > max_file_bytes:
            skipped[rel] = f"over the per-file cap ({size} bytes)"
        elif total + size > max_total_bytes:
            skipped[rel] = f"over the total cap ({size} bytes)"
        else:
            _copy(path, dest / rel)
            kept.append(rel)
            total += size
    return _write_manifest(dest, sorted(kept), skipped, total, max_file_bytes, max_total_bytes)


def _files(
    src: Path, skipped: dict[str, str], skip_model_dirs: bool = False
) -> Iterator[tuple[Path, str]]:
    """(path, path relative to src) of the files under src; excluded directories (and,
    if asked, model directories) are not entered and are listed in `skipped`."""
    for root, dirs, files in os.walk(src, followlinks=False):
        rel_root = Path(root).relative_to(src)
        if skip_model_dirs and rel_root != Path(".") and is_model_dir(Path(root), files):
            skipped[f"{rel_root}/"] = "model directory"
            dirs[:] = []
            continue
        for name in sorted(dirs):
            if name in SKIPPED_DIRS:
                skipped[str(rel_root / name) + "/"] = "excluded directory"
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            yield Path(root) / name, str(rel_root / name)


def _copy(path: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)


def _write_manifest(
    dest: Path,
    kept: list[str],
    skipped: dict[str, str],
    total: int,
    max_file_bytes: int,
    max_total_bytes: int,
) -> dict[str, Any]:
    manifest = {
        "kept": kept,
        "skipped": skipped,
        "total_bytes": total,
        "max_file_bytes": max_file_bytes,
        "max_total_bytes": max_total_bytes,
    }
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument(
        "--data", action="store_true", help="copy training-like data files instead of code"
    )
    parser.add_argument("--max-file-bytes", type=int, default=None)
    parser.add_argument("--max-total-bytes", type=int, default=None)
    args = parser.parse_args(argv)
    if args.data:
        total_cap = args.max_total_bytes or DEFAULT_DATA_MAX_TOTAL_BYTES
        manifest = collect_data_files(
            args.src, args.dest, args.max_file_bytes or total_cap, total_cap
        )
        what = "data files"
    else:
        manifest = snapshot(
            args.src,
            args.dest,
            args.max_file_bytes or 512 * 1024,
            args.max_total_bytes or 20 * 1024 * 1024,
        )
        what = "files"
    print(
        f"snapshot: kept {len(manifest['kept'])} {what} ({manifest['total_bytes']} bytes), "
        f"skipped {len(manifest['skipped'])}"
    )


if __name__ == "__main__":
    main()
