"""Shapes of common credentials, and which environment variable names hold secrets.

Every pattern is bounded in length (so a streamed scrub knows how far a match can
reach) and never matches a quote or a backslash-free JSON delimiter, so replacing a
match inside a JSON string keeps the document valid. Hex digests (git SHAs, sha256)
match none of them.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class KeyPattern(NamedTuple):
    """A named regular expression over bytes."""

    name: str
    regex: bytes


def _token(prefix: bytes, body: bytes, right: bytes = b"") -> bytes:
    """`prefix` + `body`, not preceded by a token character ("task-..." is not "sk-...").

    The left check is a lookbehind placed after the literal prefix: a regex that starts
    with a literal is scanned for far faster than one that starts with a lookbehind.
    """
    return prefix + rb"(?<![A-Za-z0-9_\-]" + prefix + rb")" + body + right


_RIGHT = rb"(?![A-Za-z0-9_\-])"

KEY_PATTERNS: tuple[KeyPattern, ...] = (
    KeyPattern(
        "private-key",
        rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s\\:,.\-]{0,16384}?"
        rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",
    ),
    KeyPattern("anthropic-key", _token(rb"sk-ant-", rb"[A-Za-z0-9_\-]{20,400}")),
    # OpenAI (sk-, sk-proj-, sk-svcacct-, ...): at least one digit, so that ordinary
    # hyphenated words after "sk-" are left alone.
    KeyPattern(
        "openai-key", _token(rb"sk-", rb"(?=[A-Za-z_\-]{0,400}[0-9])[A-Za-z0-9_\-]{20,400}")
    ),
    KeyPattern("google-api-key", _token(rb"AIza", rb"[0-9A-Za-z_\-]{35}", _RIGHT)),
    KeyPattern("github-token", _token(rb"gh[pousr]_", rb"[A-Za-z0-9]{36,255}")),
    KeyPattern("github-token", _token(rb"github_pat_", rb"[A-Za-z0-9_]{22,255}")),
    KeyPattern("huggingface-token", _token(rb"hf_", rb"[A-Za-z0-9]{30,64}", _RIGHT)),
    KeyPattern("slack-token", _token(rb"xox[abposr]-", rb"[A-Za-z0-9\-]{10,250}")),
    KeyPattern("aws-access-key", _token(rb"AKIA", rb"[0-9A-Z]{16}(?![0-9A-Za-z])")),
    KeyPattern("aws-access-key", _token(rb"ASIA", rb"[0-9A-Z]{16}(?![0-9A-Za-z])")),
    KeyPattern(
        "jwt",
        _token(
            rb"eyJ", rb"[A-Za-z0-9_\-]{8,4096}\.eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{0,4096}"
        ),
    ),
    # Two literal spellings rather than [Bb]: a literal first byte keeps the scan fast.
    KeyPattern("bearer-token", rb"Bearer[ \t]{1,8}[A-Za-z0-9._~+/\-]{16,4096}={0,4}"),
    KeyPattern("bearer-token", rb"bearer[ \t]{1,8}[A-Za-z0-9._~+/\-]{16,4096}={0,4}"),
)

# Longest possible match of any pattern above (the private-key block), in bytes.
MAX_PATTERN_BYTES = 16384 + 2 * 80

_SECRET_NAME_PARTS = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "PAT",
        "COOKIE",
    }
)
# Names that hold where a secret is, or which one, not the secret itself.
_NOT_SECRET_SUFFIXES = (
    "_PATH",
    "_FILE",
    "_DIR",
    "_SOCK",
    "_NAME",
    "_URL",
    "_HOST",
    "_PORT",
    "_MODE",
)


def looks_secret_name(name: str) -> bool:
    """Whether an environment variable name suggests a secret value (`OPENAI_API_KEY`,
    `HF_TOKEN`, `DB_PASSWORD`), but not `MAX_TOKENS` or `SSH_AUTH_SOCK`."""
    upper = name.upper()
    if upper.endswith(_NOT_SECRET_SUFFIXES):
        return False
    return any(part in _SECRET_NAME_PARTS for part in re.split(r"[^A-Z0-9]+", upper))
