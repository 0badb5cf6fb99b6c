"""The cl100k_base tokenizer, loaded offline.

tiktoken downloads its BPE file on first use; sandboxes and air-gapped clusters have
no network. The file is looked up, in order, in $TIKTOKEN_CACHE_DIR, $PTB_TIKTOKEN_DIR,
/opt/ptb/tiktoken (shipped in every task) and the copy bundled inside litellm.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from posttrainbench.core.errors import PtbError
from posttrainbench.core.model_task_layout import MODEL_LAYOUT

# tiktoken caches a file under the sha1 of its source URL; this is cl100k_base's.
CL100K_CACHE_NAME = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


class TokenizerUnavailableError(PtbError):
    """The cl100k_base BPE file is not available offline."""


def bundled_cache_dirs() -> list[Path]:
    """Directories that may hold the cl100k_base file, most specific first."""
    dirs = [os.environ.get(v) for v in ("TIKTOKEN_CACHE_DIR", "PTB_TIKTOKEN_DIR")]
    candidates = [Path(d) for d in dirs if d] + [Path(MODEL_LAYOUT.tiktoken)]
    spec = importlib.util.find_spec("litellm")
    if spec and spec.origin:
        candidates.append(Path(spec.origin).parent / "litellm_core_utils" / "tokenizers")
    return candidates


def cl100k_file() -> Path | None:
    """The cl100k_base BPE file, if one is available offline."""
    for directory in bundled_cache_dirs():
        if (directory / CL100K_CACHE_NAME).is_file():
            return directory / CL100K_CACHE_NAME
    return None


@functools.lru_cache(maxsize=1)
def cl100k():
    """The tiktoken Encoding for cl100k_base."""
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailableError(
            "the contamination checker needs tiktoken: pip install tiktoken"
        ) from exc
    found = cl100k_file()
    if found is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(found.parent)
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # network errors come in many types
        raise TokenizerUnavailableError(
            "cl100k_base is not available offline; set PTB_TIKTOKEN_DIR to a directory "
            f"holding {CL100K_CACHE_NAME} ({exc.__class__.__name__})"
        ) from exc
