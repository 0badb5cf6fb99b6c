"""Text normalization shared by the reference index, the prefilter and the scorer.

ASCII-only case folding and ASCII whitespace collapsing: both are byte-local, so the
prefilter can apply the same normalization to raw file bytes (JSON-escaped or not)
without decoding them, and a match in the normalized text is always a match there.
"""

from __future__ import annotations

import json
import re

_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")


def normalize_text(text: str) -> str:
    """ASCII-lowercase, collapse ASCII whitespace runs to one space, strip."""
    lowered = text.encode("utf-8", "surrogatepass").lower().decode("utf-8", "replace")
    return _WHITESPACE.sub(" ", lowered).strip()


def strings_of(value: object) -> list[str]:
    """Every string inside a parsed JSON value (keys excluded), depth first."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return out


def record_text(raw: bytes, is_json: bool) -> str:
    """The text of one record: all its JSON string values joined, or the raw text."""
    text = raw.decode("utf-8", "replace")
    if is_json:
        try:
            return "\n".join(strings_of(json.loads(text)))
        except ValueError:
            pass  # not valid JSON: score the line as plain text
    return text


# PostTrainBench's checker (contamination_check.py, after decon's common/text.rs) replaces
# these with spaces before matching: a record lowercased with its punctuation stripped
# still matches there, so the reference is also matched in this form (variants.py).
PTB_PUNCTUATION = "!'\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u201c\u201d\u2018\u2019\u2014"
_PTB_PUNCT_TABLE = str.maketrans({c: " " for c in PTB_PUNCTUATION})


def ptb_clean_text(text: str) -> str:
    """PostTrainBench's ``clean_text``: lowercase, punctuation to spaces, whitespace collapsed."""
    return re.sub(r"\s+", " ", text.lower().translate(_PTB_PUNCT_TABLE)).strip()
