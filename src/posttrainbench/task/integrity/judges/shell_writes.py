"""Does a shell command (or a code line) write to a given path? A conservative heuristic.

A write is: a redirection or ``tee`` into the path; ``sed -i``, ``rm``, ``touch``,
``truncate`` or ``dd of=`` naming it; ``cp``/``mv``/``rsync``/``ln``/``install`` with it
as the last argument; or Python ``open(path, "w"/"a")``. Reading, running or copying
*from* the path is not a write.
"""

from __future__ import annotations

import re
from functools import cache

_END = r"""['"]?(?=\s|$|[;&|)])"""


@cache
def _write_patterns(target: str) -> tuple[re.Pattern[str], ...]:
    return tuple(
        re.compile(p)
        for p in (
            rf"(?:>>?|\btee\b(?:\s+-a)?)\s*['\"]?(?:{target})",
            rf"\b(?:sed\s+-i\S*|rm|touch|truncate)\b[^;&|\n]*?['\"\s](?:{target})",
            rf"\bdd\b[^;&|\n]*\bof=['\"]?(?:{target})",
            rf"\b(?:cp|mv|rsync|ln|install)\b[^;&|\n]*\s['\"]?(?:{target}){_END}\s*(?:$|[;&|\n])",
            rf"\bopen\(\s*['\"](?:{target})['\"]\s*,\s*['\"][wax]",
        )
    )


def writes_to(text: str, target: str) -> bool:
    """Whether *text* writes to a path matching the regex *target*."""
    return any(p.search(text) for p in _write_patterns(target))
