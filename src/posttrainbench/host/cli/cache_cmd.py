"""`ptb cache`: the local sandbox's layer cache (`list`, `prune`) and the shared cache volume
that cloud sandboxes mount (`push`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.host.cli.options import Json

app = typer.Typer(
    help="The local sandbox's layer cache (list, prune) and the shared cache volume of "
    "cloud runs (push, --cache-volume).",
    no_args_is_help=True,
)


@app.command("push")
def push(
    volume: str = typer.Argument(..., metavar="VOLUME", help="The Modal volume (created if new)."),
    base_model: list[str] = typer.Option(
        ...,
        "-M",
        "--base-model",
        metavar="ID",
        help="Base model id, or 'all'; repeatable, or comma-separated.",
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Where models are prepared first "
        "(default: $PTB_CACHE_DIR or ~/.cache/posttrainbench).",
    ),
    force: bool = typer.Option(False, "--force", help="Prepare the models again even if prepared."),
) -> None:
    """Prepare base models here (once) and upload them to VOLUME as models/<id>/, which
    tasks compiled with `--model-from cache` read when their sandbox starts.

    Example: ptb cache push ptb-cache -M qwen3-1.7b,smollm2-135m
    """
    from posttrainbench.host.catalog import get_model, list_models
    from posttrainbench.host.data.models import prepare_models
    from posttrainbench.host.data.prepare import default_cache_dir
    from posttrainbench.host.envs.cloud_volumes import VolumeError, upload_models
    from posttrainbench.host.runner.preflight import check_cloud_login

    models = ",".join(base_model)
    ids = (
        [m.id for m in list_models()]
        if models == "all"
        else [p.strip() for p in models.split(",") if p.strip()]
    )
    if not ids:
        raise PtbError("-M/--base-model names no model")
    specs = [get_model(m) for m in ids]  # every id checked before anything is fetched
    # The login is checked before minutes of model preparation, not at the upload after it.
    check_cloud_login("modal", label="ptb cache push")
    console = Console()
    prepared = prepare_models(
        specs, cache_dir or default_cache_dir(), force=force, say=console.print
    )
    try:
        upload_models(volume, prepared)
    except VolumeError as exc:
        raise PtbError(str(exc)) from None
    console.print(
        f"uploaded {', '.join(prepared)} to Modal volume {escape(volume)} under models/",
        highlight=False,
        soft_wrap=True,
    )


def _envs_dir() -> Path:
    from posttrainbench.host.envs.env_cache import cache_root

    return cache_root() / "envs"


def _when(stamp: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M")


@app.command("list")
def list_entries(
    as_json: bool = Json,
) -> None:
    """The local sandbox's layer cache ($PTB_CACHE_DIR/envs): each entry's size, last use and
    the running trials that hold it.

    Example: ptb cache list --json
    """
    import json

    from posttrainbench.host.envs.cache_admin import dir_size, orphan_builds
    from posttrainbench.host.envs.cache_admin import list_entries as entries_of

    entries = sorted(entries_of(_envs_dir()), key=lambda e: e.last_used, reverse=True)
    orphans = [(p, dir_size(p)) for p in orphan_builds(_envs_dir())]
    if as_json:
        rows = [
            {
                "path": str(e.path),
                "layer": e.layer,
                "size_bytes": e.size_bytes,
                "last_used": e.last_used,
                "in_use": e.in_use,
                "held_by": list(e.held_by),
                "unfinished_build": False,
            }
            for e in entries
        ] + [
            {
                "path": str(p),
                "layer": None,
                "size_bytes": size,
                "last_used": p.stat().st_mtime,
                "in_use": False,
                "held_by": [],
                "unfinished_build": True,
            }
            for p, size in orphans
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    console = Console()
    for path, size in orphans:
        console.print(
            f"{escape(path.name[:30])}  {size / 2**20:>9.1f} MB  an unfinished build a killed "
            "run left (`ptb cache prune` removes it)",
            highlight=False,
            soft_wrap=True,
        )
    if not entries:
        console.print(
            f"no cache entries in {escape(str(_envs_dir()))}", highlight=False, soft_wrap=True
        )
        return
    for e in entries:
        held = ", ".join(e.held_by) or ("a running trial" if e.in_use else "-")
        console.print(
            f"{escape(e.path.name[:22])}  {e.size_bytes / 2**20:>9.1f} MB  used {_when(e.last_used)}  "
            f"held by {escape(held)}",
            highlight=False,
            soft_wrap=True,
        )
    total = sum(e.size_bytes for e in entries) / 2**30
    console.print(
        f"{len(entries)} entries, {total:.2f} GB in {escape(str(_envs_dir()))}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("prune")
def prune_entries(
    max_size: float | None = typer.Option(
        None,
        "--max-size",
        min=0,
        metavar="GB",
        help="Remove the least recently used entries until the cache is at most this many GB.",
    ),
    older_than: float | None = typer.Option(
        None,
        "--older-than",
        min=0,
        metavar="DAYS",
        help="Remove entries unused for this many days.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what would be removed; remove nothing."
    ),
) -> None:
    """Remove local layer cache entries that no running trial holds (never one that a trial uses).
    Builds also prune past $PTB_CACHE_MAX_GB when it is set.

    Example: ptb cache prune --max-size 200 --dry-run
    """
    from posttrainbench.host.envs.cache_admin import list_entries as entries_of
    from posttrainbench.host.envs.cache_admin import orphan_builds, prune, remove_orphan_builds

    if max_size is None and older_than is None:
        raise PtbError("say what to prune: --max-size GB and/or --older-than DAYS")
    envs = _envs_dir()
    # What killed builds left is never an entry anyone uses: always removed.
    for path in orphan_builds(envs) if dry_run else remove_orphan_builds(envs):
        Console().print(
            f"{'would remove' if dry_run else 'removed'} {escape(str(path))} (an unfinished build)",
            highlight=False,
            soft_wrap=True,
        )
    removed = prune(
        envs,
        None if max_size is None else int(max_size * 2**30),
        None if older_than is None else older_than * 86400,
        dry_run=dry_run,
    )
    console = Console()
    verb = "would remove" if dry_run else "removed"
    for e in removed:
        console.print(
            f"{verb} {escape(str(e.path))} ({e.size_bytes / 2**20:.1f} MB)",
            highlight=False,
            soft_wrap=True,
        )
    for e in entries_of(envs):
        if e.in_use:
            console.print(
                f"kept {escape(str(e.path))}: in use by {escape(', '.join(e.held_by) or 'a running trial')}",
                highlight=False,
                soft_wrap=True,
            )
    freed = sum(e.size_bytes for e in removed) / 2**30
    console.print(f"{verb} {len(removed)} entries, {freed:.2f} GB", highlight=False)
