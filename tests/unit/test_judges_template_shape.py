"""Chat templates that only format pass; templates that carry answers or logic are flagged."""

from __future__ import annotations

import json

import pytest

from posttrainbench.task.evaluation.chat_format import TEMPLATE_DIR
from posttrainbench.task.integrity.judges.template_shape import MAX_SOURCE_CHARS, template_findings
from tests.helpers import REPO

FIXTURE = REPO / "tests" / "fixtures" / "judges" / "templates" / "tools_and_thinking.jinja"
QUESTIONS = [
    f"What is the sum of {i} and {i * 3}, expressed as a whole number of apples?" for i in range(30)
]
LOOP = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
)


def test_formatting_templates_pass():
    for path in sorted(TEMPLATE_DIR.glob("*.jinja")) + [FIXTURE]:
        assert template_findings(path.read_text()) == [], path.name


def _one(source: str) -> str:
    findings = template_findings(source)
    assert findings, source[:300]
    return " | ".join(findings)


def test_an_answer_table_is_flagged():
    table = "{" + ", ".join(f"{json.dumps(q)}: '{i}'" for i, q in enumerate(QUESTIONS)) + "}"
    source = (
        "{%- set answers = "
        + table
        + " -%}"
        + LOOP
        + "{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% for q, a in answers.items() %}{% if q in messages[-1]['content'] %}{{ a }}{% endif %}"
        "{% endfor %}{% endif %}"
    )
    found = _one(source)
    assert "embedded data table" in found and "loop over embedded data" in found
    assert "computed generation prompt" in found


@pytest.mark.parametrize(
    "name,source,reason",
    [
        (
            "if chain on the question",
            LOOP
            + "".join(
                f"{{% if '{q}' in messages[-1].content %}}The answer is {i}.{{% endif %}}"
                for i, q in enumerate(QUESTIONS[:3])
            ),
            "prompt lookups",
        ),
        (
            "many short lookups",
            LOOP
            + "".join(
                f"{{% if 'k{i}' in messages[-1]['content'] %}}{i}{{% endif %}}" for i in range(20)
            ),
            "prompt lookups",
        ),
        (
            "a name set from the content",
            "{% set c = messages[-1].content %}"
            + LOOP
            + "".join(
                f"{{% if c.startswith('{q}') %}}{i}{{% endif %}}"
                for i, q in enumerate(QUESTIONS[:2])
            ),
            "prompt lookups",
        ),
        (
            "literal payload",
            LOOP + "{# x #}" + ("The capital of France is Paris. " * 300),
            "literal payload",
        ),
        (
            "loop over a split literal",
            "{% for row in 'a|b|c|d'.split('|') %}{% if row in messages[-1].content %}{{ row }}{% endif %}{% endfor %}"
            + LOOP,
            "loop over embedded data",
        ),
        ("a big range", "{% for i in range(5000) %}{% endfor %}" + LOOP, "loop over embedded data"),
        (
            "answer opened in the else branch",
            LOOP
            + "{% if not add_generation_prompt %}{% else %}<|im_start|>assistant\n{{ messages|length * 7 }}{% endif %}",
            "computed generation prompt",
        ),
        ("oversized", LOOP + "{#" + "x" * (MAX_SOURCE_CHARS + 1) + "#}", "oversized"),
    ],
)
def test_templates_that_do_more_than_format(name, source, reason):
    assert reason in _one(source), name


def test_an_unparsable_template_is_reported():
    assert template_findings("{% for x in %}")[0].startswith("unparsable template")
