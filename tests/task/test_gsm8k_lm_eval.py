"""GSM8K's lm-eval extraction (kept as tests/security's plain-rule control, no longer the
score) against lm-eval-harness itself (task tier: needs ``lm-eval`` installed).

lm-eval's own gsm8k task config (``lm_eval/tasks/gsm8k/gsm8k.yaml``) is read to build
its ``RegexFilter``s and ``exact_match`` arguments, so a change there shows up here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from posttrainbench.task.benchmarks.gsm8k.extract import flexible_extract, judge, strict_extract
from tests.helpers import REPO, SHARED_DATA

lm_eval = pytest.importorskip(
    "lm_eval", reason="lm-eval not installed (see tests/task/requirements-nodeps.txt)"
)
yaml = pytest.importorskip("yaml")

FIXTURES = REPO / "tests" / "fixtures" / "gsm8k"


@pytest.fixture(scope="module")
def reference():
    """(strict filter, flexible filter, exact_match kwargs) exactly as lm-eval's gsm8k task defines them."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    config = yaml.safe_load(
        (Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text()
    )
    filters = {}
    for entry in config["filter_list"]:
        regex = entry["filter"][0]
        assert regex["function"] == "regex" and entry["filter"][1]["function"] == "take_first"
        filters[entry["name"]] = RegexFilter(
            regex_pattern=regex["regex_pattern"], group_select=regex.get("group_select", 0)
        )
    (metric,) = config["metric_list"]
    kwargs = {k: metric[k] for k in ("regexes_to_ignore", "ignore_case", "ignore_punctuation")}

    def em(prediction: str, ref: str) -> bool:
        return bool(exact_match_hf_evaluate([prediction], [ref], **kwargs)["exact_match"])

    return filters["strict-match"], filters["flexible-extract"], em


def _lm_eval_verdict(reference, output: str, ref: str) -> tuple[str, str, bool, bool]:
    strict_f, flex_f, em = reference
    strict = strict_f.apply([[output]], [{}])[0][0]
    flex = flex_f.apply([[output]], [{}])[0][0]
    return strict, flex, em(strict, ref), em(flex, ref)


GSM8K_TEST = SHARED_DATA / "gsm8k" / "test.jsonl"


def _real_answer_outputs(n: int = 120) -> list[tuple[str, str]]:
    """(model-like output, reference) pairs built from real GSM8K test answers (none
    where the shared reference data is absent; test_real_answers_are_in_the_set says so)."""
    if not GSM8K_TEST.is_file():
        return []
    rows = [json.loads(line) for line in GSM8K_TEST.read_text().splitlines()[:n]]
    pairs = []
    for i, row in enumerate(rows):
        ref = row["answer"]
        body, _, final = ref.rpartition("####")
        final = final.strip()
        clean = re.sub(r"<<[^>]*>>", "", body).strip()
        other = rows[(i + 1) % len(rows)]["answer"].rpartition("####")[2].strip()
        try:
            as_int = int(final.replace(",", ""))
            formatted = f"{as_int:,}"
        except ValueError:
            formatted = final
        pairs += [
            (ref, ref),  # the gold solution itself
            (f"{clean}\n#### {final}", ref),
            (f"{clean}\nThe answer is ${formatted}.", ref),
            (f"{clean}\n#### {other}", ref),  # wrong final number
            (f"{clean}\n#### {final}\n\nQuestion: next one costs 3 dollars", ref),
            (f"{clean}\nSo the answer is {final} dollars and 7 cents.", ref),
            (clean, ref),  # no final line
        ]
    return pairs


def _pairs() -> list[tuple[str, str]]:
    outputs = json.loads((FIXTURES / "tricky_outputs.json").read_text())
    refs = json.loads((FIXTURES / "references.json").read_text())
    return [(o, r) for o in outputs for r in refs] + _real_answer_outputs()


@pytest.mark.skipif(not GSM8K_TEST.is_file(), reason="no GSM8K data in ../shared/data")
def test_real_answers_are_in_the_set():
    assert len(_real_answer_outputs()) == 840


def test_parity_set_is_large_and_mixed(reference):
    pairs = _pairs()
    assert len(pairs) >= 200
    verdicts = [_lm_eval_verdict(reference, o, r) for o, r in pairs]
    # the set exercises both outcomes of both filters, and the invalid fallback
    for k in (2, 3):
        assert any(v[k] for v in verdicts) and not all(v[k] for v in verdicts)
    assert any(v[0] == "[invalid]" for v in verdicts) and any(v[1] == "[invalid]" for v in verdicts)


def test_extraction_and_match_equal_lm_eval(reference):
    mismatches = []
    for output, ref in _pairs():
        expected = _lm_eval_verdict(reference, output, ref)
        ours = judge(output, ref)
        got = (ours.strict, ours.flexible, ours.strict_correct, ours.flexible_correct)
        if got != expected:
            mismatches.append((output, ref[-30:], got, expected))
    assert not mismatches, mismatches[:10]


def test_filters_alone_equal_lm_eval(reference):
    strict_f, flex_f, _ = reference
    for output in json.loads((FIXTURES / "tricky_outputs.json").read_text()):
        assert strict_extract(output) == strict_f.apply([[output]], [{}])[0][0], output
        assert flexible_extract(output) == flex_f.apply([[output]], [{}])[0][0], output
