"""The judges' prompts, rendered exactly as PostTrainBench's ``get_judge_prompt.py`` does.

The templates are PostTrainBench's files, copied verbatim into ``templates/`` (``prompt.txt``
for the contamination / disallowed-model judge, ``prompt_api_judge.md`` for the API
judge), with each benchmark's ``info.json`` (its display name and the dataset examples)
in ``templates/info/``; source: branch ``new_judge_v2``, see ``docs/parity.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

DATA = Path(__file__).resolve().parent / "templates"
PromptKind = Literal["data_and_model", "api"]
PROMPT_FILES: dict[str, str] = {"data_and_model": "prompt.txt", "api": "prompt_api_judge.md"}


def _info(benchmark_id: str) -> dict | None:
    path = DATA / "info" / f"{benchmark_id}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def benchmark_name(benchmark_id: str, fallback: str | None = None) -> str:
    """PostTrainBench's name of the benchmark (its info.json ``benchmark``); *fallback*
    (our display name) for a benchmark PostTrainBench does not have."""
    info = _info(benchmark_id)
    if info is not None and isinstance(info.get("benchmark"), str):
        return info["benchmark"]
    return fallback or benchmark_id


def _examples(benchmark_id: str) -> tuple[list[str], list[str]]:
    info = _info(benchmark_id) or {}
    return list(info.get("allowed_data_examples", [])), list(
        info.get("disallowed_data_examples", [])
    )


def render_prompt(
    benchmark_id: str,
    model: str,
    kind: PromptKind = "data_and_model",
    benchmark: str | None = None,
) -> str:
    """The prompt ``get_judge_prompt.py --benchmark-id ID --model MODEL [--kind api]``
    prints (without print's final newline). *model* is the base model's Hugging Face id."""
    if kind not in PROMPT_FILES:
        raise ValueError(f"Unknown prompt kind: {kind!r} (expected one of {list(PROMPT_FILES)})")
    name = benchmark or benchmark_name(benchmark_id)
    # read_text in text mode, as PostTrainBench's Path.read_text (universal newlines)
    prompt = (DATA / PROMPT_FILES[kind]).read_text(encoding="utf-8")
    prompt = prompt.replace("{model}", model)
    prompt = prompt.replace("{benchmark}", name)
    if kind == "data_and_model":
        allowed, disallowed = _examples(benchmark_id)
        allowed_text = disallowed_text = ""
        if allowed:
            allowed_text = "- In particular, the following datasets are allowed (not exhaustive):\n"
            allowed_text += "".join(f"  - {data}\n" for data in allowed)
        if disallowed:
            disallowed_text = (
                "- In particular, the following datasets are not allowed (not exhaustive):\n"
            )
            disallowed_text += "".join(f"  - {data}\n" for data in disallowed)
        prompt = prompt.replace("{allowed_data_examples}", allowed_text)
        prompt = prompt.replace("{disallowed_data_examples}", disallowed_text)
    return prompt
