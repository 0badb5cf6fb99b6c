"""Stage a size-budgeted snapshot of the agent's code for later judging.

Weight files, caches and the final model are left out; every file over the per-file
cap is skipped, and copying stops at the total cap. A manifest lists what was kept
and what was skipped, and why.

Usage: python -m posttrainbench.sandbox.snapshot --src /app --dest DIR
           [--max-file-bytes N] [--max-total-bytes N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

WEIGHT_SUFFIXES = frozenset(
    {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".onnx", ".h5", ".npz", ".npy", ".arrow", ".parquet"}
)
SKIPPED_DIRS = frozenset({"final_model", "__pycache__", ".git", ".cache", "node_modules", ".venv", "venv", "wandb"})


def snapshot(src: Path, dest: Path, max_file_bytes: int, max_total_bytes: int) -> dict:
    """Copy code files from src to dest within the caps; return the manifest."""
    kept: list[str] = []
    skipped: dict[str, str] = {}
    total = 0
    dest.mkdir(parents=True, exist_ok=True)
    for root, dirs, files in os.walk(src, followlinks=False):
        rel_root = Path(root).relative_to(src)
        for name in sorted(dirs):
            if name in SKIPPED_DIRS:
                skipped[str(rel_root / name) + "/"] = "excluded directory"
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(root) / name
            rel = str(rel_root / name)
            if path.is_symlink() or not path.is_file():
                skipped[rel] = "not a regular file"
                continue
            size = path.stat().st_size
            if path.suffix.lower() in WEIGHT_SUFFIXES:
                skipped[rel] = "weights or data file"
            elif size > max_file_bytes:
                skipped[rel] = f"over the per-file cap ({size} bytes)"
            elif total + size > max_total_bytes:
                skipped[rel] = "over the total cap"
            else:
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                kept.append(rel)
                total += size
    manifest = {"kept": kept, "skipped": skipped, "total_bytes": total,
                "max_file_bytes": max_file_bytes, "max_total_bytes": max_total_bytes}
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--dest", type=Path, required=True)
    parser.add_argument("--max-file-bytes", type=int, default=512 * 1024)
    parser.add_argument("--max-total-bytes", type=int, default=20 * 1024 * 1024)
    args = parser.parse_args(argv)
    manifest = snapshot(args.src, args.dest, args.max_file_bytes, args.max_total_bytes)
    print(f"snapshot: kept {len(manifest['kept'])} files ({manifest['total_bytes']} bytes), "
          f"skipped {len(manifest['skipped'])}")


if __name__ == "__main__":
    main()
