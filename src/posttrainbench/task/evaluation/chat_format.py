"""Prompt rendering with PostTrainBench's chat templates, forced by model family.

PostTrainBench's final evaluation never uses the template a model ships: each
``evaluate.py`` passes ``chat_template=<templates dir>/<family>.jinja`` to vLLM, with the
family found by ``model_type()`` (aisa-group/PostTrainBench, ``src/eval/tasks/*/evaluate.py``):
the first of ``qwen``, ``llama``, ``gemma``, ``smollm`` in the evaluated path (which, in
its pipeline, names the base model), else in ``config.json``'s first architecture
(``gemma``, ``llama``, ``qwen``, ``smollm`` in that order), else ``ValueError``. So does
this module; the name it reads is the task's base-model source, never an agent-chosen
directory name. ``templates/`` holds PostTrainBench's files unchanged (its commit is in
docs/parity.md). A model that ships its own template therefore cannot rewrite prompts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import nodes
from jinja2.ext import Extension

TEMPLATE_DIR = Path(__file__).parent / "templates"
# model_type()'s order on the path, then on the architecture (they differ in PTB).
NAME_FAMILIES = ("qwen", "llama", "gemma", "smollm")
ARCHITECTURE_FAMILIES = ("gemma", "llama", "qwen", "smollm")
# template_kwargs(): llama3.jinja is named there but not shipped by PostTrainBench, so a
# llama-family model fails there as it fails here (no such template).
FAMILY_TEMPLATES = {
    "qwen": "qwen3.jinja",
    "llama": "llama3.jinja",
    "gemma": "gemma3.jinja",
    "smollm": "smollm.jinja",
}


class TemplateFamilyError(ValueError):
    """The chat template's model family cannot be determined, or its file is missing."""


def read_model_config(model_path: str | Path) -> dict[str, Any]:
    """``config.json`` of a model directory ({} when absent or unreadable)."""
    try:
        config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def model_family(name: str, config: Mapping[str, Any]) -> str:
    """PostTrainBench's ``model_type()``: the family in *name*, else in the architecture."""
    lowered = name.lower()
    for family in NAME_FAMILIES:
        if family in lowered:
            return family
    architectures = config.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures else None
    if not isinstance(first, str):
        raise TemplateFamilyError(
            f"cannot determine the chat template's model family: {name!r} names none of "
            f"{', '.join(NAME_FAMILIES)} and config.json has no architectures"
        )
    for family in ARCHITECTURE_FAMILIES:
        if family in first.lower():
            return family
    raise TemplateFamilyError(
        f"cannot determine the chat template's model family: {name!r} names none of "
        f"{', '.join(NAME_FAMILIES)} and the architecture {first!r} is none of them either"
    )


def template_path(
    family: str, templates_dir: Path = TEMPLATE_DIR, overrides: Mapping[str, str] | None = None
) -> Path:
    """The template file of *family* (a benchmark may name another, e.g. BFCL's Gemma)."""
    name = (overrides or {}).get(family) or FAMILY_TEMPLATES[family]
    path = Path(templates_dir) / name
    if not path.is_file():
        raise TemplateFamilyError(f"no chat template {name} in {templates_dir} (family {family})")
    return path


@cache
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def forced_template(
    name: str,
    config: Mapping[str, Any],
    templates_dir: Path = TEMPLATE_DIR,
    overrides: Mapping[str, str] | None = None,
) -> str:
    """The text of the template PostTrainBench forces for a model named *name*."""
    return _read(template_path(model_family(name, config), templates_dir, overrides))


def render_chat(
    messages: Sequence[dict[str, Any]],
    template: str,
    tokenizer: Any = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> str:
    """The prompt text for *messages* with *template*, ending with the assistant's opening.

    *tools*: OpenAI-style tool dicts, passed as ``tools=`` like vLLM's chat endpoint
    does (``apply_hf_chat_template(..., tools=[t.model_dump() for t in request.tools])``).
    """
    extra = {} if tools is None else {"tools": list(tools)}
    if tokenizer is not None:
        return str(
            tokenizer.apply_chat_template(
                list(messages),
                chat_template=template,
                tokenize=False,
                add_generation_prompt=True,
                **extra,
            )
        )
    # No tokenizer (scorer tests, data tools): the template as transformers compiles it.
    return _compile(template).render(
        messages=list(messages), add_generation_prompt=True, bos_token="", **extra
    )


@cache
def _compile(template: str) -> Any:
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:  # the host has no transformers: the same environment, by hand
        return _jinja_environment().from_string(template)
    return _compile_jinja_template(template)


class GenerationTag(Extension):
    """transformers' ``{% generation %}`` block (it marks assistant text; here it renders it)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _jinja_environment() -> Any:
    """transformers' chat-template environment: sandboxed, trimmed, ``{% generation %}``."""
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, **kw: Any) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kw)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
