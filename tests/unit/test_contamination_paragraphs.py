"""The numpy paragraph splitter gives exactly the paragraphs of the original regex splitter."""

from __future__ import annotations

import random
import re

import pytest

from posttrainbench.task.integrity.contamination.paragraphs import paragraph_spans
from posttrainbench.task.integrity.contamination.records import line_records

_BREAK = re.compile(rb"\n[ \t\r]*\n")


def _regex_spans(data: bytes) -> tuple[list[int], list[int]]:
    """The first splitter: breaks are regex matches, pieces that strip() to nothing drop."""
    starts, ends, pos = [], [], 0
    for brk in [*_BREAK.finditer(data), None]:
        end = brk.start() if brk else len(data)
        if data[pos:end].strip():
            starts.append(pos)
            ends.append(end)
        pos = brk.end() if brk else pos
    return starts, ends


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\n\n\n",
        b"one",
        b"one\n",
        b"one\n\ntwo",  # no trailing newline
        b"one\n\n\ntwo\n",  # three newlines: the third starts the next paragraph
        b"one\n\n\n\ntwo\n\n",
        b"one\r\n\r\ntwo\r\n",  # CRLF
        b"one\n  \t \ntwo\n \n",  # blank lines holding spaces and tabs
        b"one\n\x0b\ntwo",  # \x0b is whitespace to strip() but not a blank-line character
        b"one\n\x0c\n\n\ntwo",
        b"  indented\n    code\n\n\tx = 1\n",
        "caf\u00e9 na\u00efve\n\n\u00fcber \u2014 \u65e5\u672c\n \n\u00e9".encode(),
        b" \n \n \n",
        b"\r\n\r\n",
    ],
)
def test_tricky_inputs_split_like_the_regex_splitter(data):
    assert paragraph_spans(data) == _regex_spans(data)


def test_random_inputs_split_like_the_regex_splitter():
    rng = random.Random(3)
    alphabet = [b"a", b"word ", b" ", b"\t", b"\r", b"\n", b"\n", b"\n\n", b"\x0b", b"\xc3\xa9"]
    for _ in range(3000):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        assert paragraph_spans(data) == _regex_spans(data), data


def test_text_records_locate_paragraphs_by_file_offset():
    block = line_records(b"first\n\n\nsecond para\nwrapped\n \n", "txt", byte_offset=100)
    assert [block.record(i) for i in range(len(block.starts))] == [
        b"first",
        b"\nsecond para\nwrapped",
    ]
    assert [block.locator(i) for i in range(2)] == [
        "paragraph at byte 100",
        "paragraph at byte 107",
    ]
