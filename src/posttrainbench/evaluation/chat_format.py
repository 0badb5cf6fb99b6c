"""Prompt rendering per model family, chosen from the model's own files.

A model directory that ships a chat template (``tokenizer_config.json`` or
``chat_template.jinja``) is rendered with it. Otherwise (base models, or an agent that
saved no template) the family comes from ``config.json`` (``model_type``) and the
tokenizer's special tokens, never from the directory name, and the matching template
in ``templates/`` is used: Qwen3 and SmolLM use ChatML, Llama 3 its header format,
Gemma 3 its turn format (system text, e.g. BFCL's tool list, folded into the first
user turn because Gemma has no system role).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

TEMPLATE_DIR = Path(__file__).parent / "templates"
FAMILY_TEMPLATES = {"chatml": "chatml.jinja", "llama3": "llama3.jinja", "gemma3": "gemma3.jinja"}


def read_model_config(model_path: str | Path) -> dict[str, Any]:
    """``config.json`` of a model directory ({} when absent or unreadable)."""
    try:
        return json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def detect_family(config: dict[str, Any], vocab: set[str] | frozenset[str] = frozenset()) -> str:
    """Template family from the model config and the tokenizer's special tokens."""
    model_type = str(
        config.get("model_type") or config.get("text_config", {}).get("model_type") or ""
    ).lower()
    if model_type.startswith("gemma"):
        return "gemma3"
    if model_type.startswith(("qwen", "smollm")):
        return "chatml"
    if "<|start_header_id|>" in vocab:
        return "llama3"
    if "<|im_start|>" in vocab:
        return "chatml"  # e.g. SmolLM2: model_type llama, ChatML tokens
    if model_type == "llama":
        return "llama3"
    return "chatml"


@cache
def family_template(family: str) -> str:
    return (TEMPLATE_DIR / FAMILY_TEMPLATES[family]).read_text(encoding="utf-8")


def _special_vocab(tokenizer: Any) -> set[str]:
    if tokenizer is None:
        return set()
    try:
        return set(tokenizer.get_vocab())
    except Exception:
        return set()


def render_chat(
    messages: Sequence[dict[str, str]], tokenizer: Any = None, config: dict[str, Any] | None = None
) -> str:
    """The prompt text for *messages*, ending with the assistant turn's opening."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=True
        )
    template = family_template(detect_family(config or {}, _special_vocab(tokenizer)))
    if tokenizer is not None:
        return tokenizer.apply_chat_template(
            list(messages), chat_template=template, tokenize=False, add_generation_prompt=True
        )
    # No tokenizer (scorer tests, data tools): jinja2 directly, as transformers does.
    from jinja2 import Environment

    compiled = Environment(keep_trailing_newline=True).from_string(template)
    return compiled.render(messages=list(messages), add_generation_prompt=True, bos_token="")
