"""The Jinja environment over `host/agents/templates/` (prompts, sandbox probes, config blocks)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

TEMPLATES = Path(__file__).resolve().parent / "templates"


@lru_cache(maxsize=1)
def template_env() -> Environment:
    """One strict environment: a missing variable is an error, not an empty string."""
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(name: str, **values: object) -> str:
    """Render the template file `name` with `values`."""
    return template_env().get_template(name).render(**values)
