"""A mixed training corpus with planted test items, generated locally and deterministically.

Three files, a third of the size each, like the data an agent assembles:

* ``chat.jsonl``: chat records of the real GSM8K training problems (the hardest case for
  the prefilter: the test set's style and vocabulary);
* ``code.jsonl``: Python standard-library source files, one JSON record per file
  (``{"path", "content"}``: long records, many ``\\n`` and ``\\"`` escapes);
* ``text.txt``: plain prose paragraphs, hard-wrapped: standard-library docstrings and
  GSM8K training problems and solutions.

Test items are planted verbatim: as a chat record, inside a code record's docstring, and
as a wrapped paragraph. Where each one went is returned, so a run can tell planted items
found from false positives.
"""

from __future__ import annotations

import ast
import json
import random
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path

from posttrainbench.task.integrity.contamination.reference import ReferenceItem

FILES = ("chat.jsonl", "code.jsonl", "text.txt")
GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"


@dataclass(frozen=True)
class Plant:
    """A test item written into the corpus: which item, which file, which record."""

    item: int
    file: str
    locator: str  # as the checker reports it: 'line N' or 'paragraph at byte N'


def _chat(question: str, answer: str) -> str:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return json.dumps({"messages": messages})


def _stdlib_sources() -> list[tuple[str, str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            out.append((str(path.relative_to(stdlib)), path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue
    return out


def _docstrings(sources: list[tuple[str, str]]) -> list[str]:
    docs = []
    for _, text in sources[:400]:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Module):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:
                    docs.extend(p for p in doc.split("\n\n") if len(p) > 60)
    return docs


def _paragraph(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=78)


def _fill(path: Path, pieces: list[str], target: int, sep: str, rng: random.Random) -> int:
    """Write shuffled *pieces* (each followed by *sep*) until *target* bytes; records written."""
    written = count = 0
    with path.open("w", encoding="utf-8") as handle:
        while written < target:
            rng.shuffle(pieces)
            for piece in pieces:
                handle.write(piece + sep)
                written += len(piece.encode()) + len(sep)
                count += 1
                if written >= target:
                    break
    return count


def write_corpus(
    directory: Path, megabytes: float, reference: list[ReferenceItem], planted: int, seed: int = 0
) -> list[Plant]:
    """Write the three files (about *megabytes* MB in all) under *directory*; the plants."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    gsm8k = [json.loads(line) for line in _train_lines()]
    sources = _stdlib_sources()
    per_file = int(megabytes * 1e6 / 3)
    chat = [_chat(r["question"], r["answer"]) for r in gsm8k]
    code = [json.dumps({"path": p, "content": t[:200_000]}) for p, t in sources]
    prose = [_paragraph(d) for d in _docstrings(sources)]
    prose += [_paragraph(f"{r['question']} {r['answer']}") for r in gsm8k]
    counts = {
        "chat.jsonl": _fill(directory / "chat.jsonl", chat, per_file, "\n", rng),
        "code.jsonl": _fill(directory / "code.jsonl", code, per_file, "\n", rng),
        "text.txt": _fill(directory / "text.txt", prose, per_file, "\n\n", rng),
    }
    items = rng.sample(range(len(reference)), planted)
    plants = [
        _plant(directory, FILES[n % 3], reference[i], i, counts, rng) for n, i in enumerate(items)
    ]
    return plants


def _plant(
    directory: Path, name: str, item: ReferenceItem, index: int, counts: dict, rng: random.Random
) -> Plant:
    """Insert one test item after a random record of file *name*."""
    path = directory / name
    data = path.read_bytes()
    sep = b"\n\n" if name.endswith(".txt") else b"\n"
    # Early in the file half of the time, so the naive checker's prefix sees some plants.
    limit = counts[name] // 50 if rng.random() < 0.5 else counts[name]
    after = rng.randrange(1, max(2, limit))
    pos = -len(sep)
    for _ in range(after):
        pos = data.index(sep, pos + len(sep))
    pos += len(sep)
    if name == "chat.jsonl":
        record = _chat(item.question, item.answer or "")
    elif name == "code.jsonl":
        content = (
            f'def solve():\n    """{item.question}\n\n    {item.answer}\n    """\n    return None\n'
        )
        record = json.dumps({"path": "planted.py", "content": content})
    else:
        record = _paragraph(f"{item.question} {item.answer}")
    path.write_bytes(data[:pos] + record.encode() + sep + data[pos:])
    line = data[:pos].count(b"\n") + 1
    locator = f"line {line}" if sep == b"\n" else f"paragraph at byte {pos}"
    return Plant(index, name, locator)


def _train_lines() -> list[str]:
    return (GSM8K / "train.jsonl").read_text().splitlines()
