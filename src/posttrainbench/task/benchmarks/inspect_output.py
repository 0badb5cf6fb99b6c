"""What an inspect scorer sees of a model's reply: ``state.output.completion``.

inspect-ai 0.3.150 turns a chat reply's first ``<think ...>...</think>`` block into
reasoning content (``_openai.py``, ``parse_content_with_reasoning``), so its scorers read the
rest, stripped; a lone ``</think>`` stays. PostTrainBench's inspect tasks (GSM8K, AIME,
GPQA, HumanEval) score that text.
"""

from __future__ import annotations

import re

_THINK = re.compile(
    r'<think(?:\s+signature="([^"]*)")?(?:\s+redacted="(true)")?\s*>(.*?)</think>', re.DOTALL
)


def inspect_completion(text: str) -> str:
    """``state.output.completion`` for a reply whose content is *text*."""
    match = _THINK.search(text)
    if match is None:
        return text
    return (text[: match.start()] + text[match.end() :]).strip()
