"""A directory of Jinja templates rendered into an output directory (both task compilers)."""

from __future__ import annotations

import shutil
from pathlib import Path

from jinja2 import Environment

from posttrainbench.core.trusted_python import TEMPLATE_VALUES


def render_tree(env: Environment, root: Path, context: dict, out: Path) -> None:
    """Render every template (`*.j2`, suffix dropped) under *root* into *out* and copy every
    static file; shell scripts become executable. Files named `_*` are partials that other
    templates include, and `__pycache__` is never copied. Every template may name the
    flags of a trusted Python as ``trusted_python`` (see ``posttrainbench.core.trusted_python``)."""
    context = {"trusted_python": TEMPLATE_VALUES, **context}
    for source in sorted(root.rglob("*")):
        if source.is_dir() or source.name.startswith("_") or "__pycache__" in source.parts:
            continue
        rel = source.relative_to(root)
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.suffix == ".j2":
            target = target.with_suffix("")
            target.write_text(env.get_template(rel.as_posix()).render(**context), encoding="utf-8")
        else:
            shutil.copyfile(source, target)
        if target.suffix == ".sh":
            target.chmod(0o755)
