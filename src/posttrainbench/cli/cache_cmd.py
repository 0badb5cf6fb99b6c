"""`ptb cache push`: base models into the shared cache volume that cloud sandboxes mount."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.errors import PtbError

app = typer.Typer(help="The shared cache volume of cloud runs (--cache-volume).", no_args_is_help=True)


@app.command("push")
def push(
    volume: str = typer.Argument(..., help="The Modal volume (created if new)."),
    models: str = typer.Option(..., "--models", "-m", help="Comma-separated base model ids, or 'all'."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Where models are prepared first "
                                             "(default: $PTB_CACHE_DIR or ~/.cache/posttrainbench)."),
    force: bool = typer.Option(False, "--force", help="Prepare the models again even if prepared."),
) -> None:
    """Prepare base models here (once) and upload them to VOLUME as models/<id>/, which
    tasks compiled with `--model-from cache` read when their sandbox starts."""
    from posttrainbench.catalog import get_model, list_models
    from posttrainbench.data.models import prepare_models
    from posttrainbench.data.prepare import default_cache_dir
    from posttrainbench.envs.cloud_volumes import VolumeError, upload_models

    ids = [m.id for m in list_models()] if models == "all" else [p.strip() for p in models.split(",") if p.strip()]
    if not ids:
        raise PtbError("--models names no model")
    specs = [get_model(m) for m in ids]  # every id checked before anything is fetched
    console = Console()
    prepared = prepare_models(specs, cache_dir or default_cache_dir(), force=force, say=console.print)
    try:
        upload_models(volume, prepared)
    except VolumeError as exc:
        raise PtbError(str(exc)) from None
    console.print(f"uploaded {', '.join(prepared)} to Modal volume {escape(volume)} under models/",
                  highlight=False, soft_wrap=True)
