"""From a model's reply to the answer inspect_evals' ``humaneval`` executes, exactly.

PostTrainBench scores HumanEval with ``inspect_evals.humaneval.humaneval(sandbox="local")``
(inspect-evals 0.3.103, the same ``humaneval.py`` as PostTrainBench's pinned commit
06001a83e6d7c709c2ede0570dce7f1031a0bad8) on inspect-ai 0.3.150. Its scorer ``verify()``
runs ``find_code(state.output.completion)`` and then ``python -c`` on::

    prompt + answer + "\\n" + test + "\\n" + "check(" + entry_point + ")"

This module reproduces both steps on the raw text a model generated:

* :func:`inspect_completion`: what ``state.output.completion`` is for that text.
  inspect's ``ChatMessageAssistant`` cleaves the first ``<think ...>...</think>`` pair
  out of a string reply (``model/_reasoning.py``: ``parse_content_with_reasoning``) and
  strips what is left; without such a pair the text stays as it is (a lone
  ``</think>`` included).
* :func:`find_code`: ``humaneval.py``'s ``find_code``, quirks and all. The first
  ```` ```python\\n ```` block if there is one, else the first ```` ```\\n ```` block (each
  needs its closing fence), cut by ``extract_function_body``, ``code[code.find(":\\n    ")
  + 2:]``: the lines after the first line that ends in a colon and is followed by one
  indented by at least 4 spaces (the body after the ``def`` line, or after whatever
  comes first: a ``class``, an ``if``). When that string is absent ``find`` gives -1 and the block only loses its
  first character. With no such block the completion is the answer as it is.

The referee (:mod:`.execution`) executes ``prompt + answer`` in the candidate process and
the same prompt and test in the referee; :func:`program` is the single program text that
inspect would run for the same answer (tests/task/test_humaneval_inspect_parity.py checks
all three against inspect's own functions).
"""

from __future__ import annotations

import re

from ..inspect_output import inspect_completion

# humaneval.py's find_code patterns, verbatim.
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_PLAIN_BLOCK = re.compile(r"```\n(.*?)```", re.DOTALL)


# inspect-ai 0.3.150 model/_reasoning.py, verbatim.
def extract_function_body(code: str) -> str:
    """humaneval.py's ``extract_function_body`` (``find`` may give -1: then ``code[1:]``)."""
    return code[code.find(":\n    ") + 2 :]


def find_code(completion: str) -> str:
    """humaneval.py's ``find_code``: the answer it appends to the prompt."""
    matches = _PYTHON_BLOCK.findall(completion) + _PLAIN_BLOCK.findall(completion)
    if matches:
        return extract_function_body(matches[0])
    return completion


def answer(text: str) -> str:
    """The answer inspect's ``verify()`` executes after the prompt, for the model's *text*."""
    return find_code(inspect_completion(text))


def program(prompt: str, answer: str, test: str, entry_point: str) -> str:
    """The program ``verify()`` passes to ``python -c`` (its ``"".join(code)``)."""
    return "".join([prompt, answer, "\n", test, "\n", "".join(["check(", entry_point, ")"])])
