"""The chat templates a model directory ships, wherever transformers looks for them.

``chat_template.jinja``, ``chat_template.json`` (``{"chat_template": ...}``), the
``chat_template`` of ``tokenizer_config.json`` (a string, or a list of
``{"name", "template"}``) and ``additional_chat_templates/*.jinja``. Files are opened
without following links and read up to a cap (a template past it is reported by size).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from posttrainbench.core.nofollow import open_regular
from posttrainbench.task.integrity.judges.template_shape import MAX_SOURCE_CHARS

MAX_FILE_BYTES = 16 * 1024 * 1024
TEMPLATE_FILE = "chat_template.jinja"
EXTRA_TEMPLATES_DIR = "additional_chat_templates"


def _read(path: Path) -> str | None:
    try:
        fd, _ = open_regular(path)
    except OSError:  # missing, a link, or not a regular file
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_FILE_BYTES + 1).decode("utf-8", errors="replace")


def _from_json(text: str | None, key: str) -> list[tuple[str, str]]:
    if text is None:
        return []
    try:
        value = json.loads(text).get(key)
    except (ValueError, AttributeError):
        return []
    if isinstance(value, str):
        return [("", value)]
    if isinstance(value, list):
        return [
            (str(v.get("name", i)), v["template"])
            for i, v in enumerate(value)
            if isinstance(v, dict) and isinstance(v.get("template"), str)
        ]
    return []


def chat_templates(model_dir: Path) -> dict[str, str]:
    """{where: template source} of every chat template in *model_dir*."""
    found: dict[str, str] = {}
    direct = _read(model_dir / TEMPLATE_FILE)
    if direct is not None:
        found[TEMPLATE_FILE] = direct
    for name in ("chat_template.json", "tokenizer_config.json"):
        for label, source in _from_json(_read(model_dir / name), "chat_template"):
            found[f"{name}{':' + label if label else ''}"] = source
    extra = model_dir / EXTRA_TEMPLATES_DIR
    if extra.is_dir() and not extra.is_symlink():
        for path in sorted(extra.glob("*.jinja")):
            source = _read(path)
            if source is not None:
                found[f"{EXTRA_TEMPLATES_DIR}/{path.name}"] = source
    return {
        where: source[: MAX_SOURCE_CHARS * 4] + ("…" if len(source) > MAX_SOURCE_CHARS * 4 else "")
        for where, source in found.items()
    }
