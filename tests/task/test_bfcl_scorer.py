"""BFCL simple_python scorer, decoder, prompt and registry (host-safe: no torch)."""

from __future__ import annotations

import collections
import importlib.util
import random
import sys
import types
from typing import Any

import pytest

from posttrainbench.benchmarks import UnknownBenchmarkError, get_benchmark
from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.bfcl.checker import check_simple_call, standardize_string
from posttrainbench.benchmarks.bfcl.decode import (
    DecodeError,
    cannot_become_call,
    decode_calls,
    format_call,
)
from posttrainbench.evaluation.chat_format import render_chat

HAS_BFCL = importlib.util.find_spec("bfcl_eval") is not None
needs_bfcl = pytest.mark.skipif(
    not HAS_BFCL, reason="bfcl-eval data not installed (pip install --no-deps bfcl-eval)"
)

# simple_python_200's possible answer omits a required parameter: no output can pass it
UNSATISFIABLE = {"simple_python_200"}


def _first(alternatives: list) -> Any:
    """Ground truth value: first alternative, recursing into dicts / lists of dicts."""
    v = alternatives[0]
    if isinstance(v, dict):
        return {k: _first(alts) for k, alts in v.items() if alts and alts[0] != ""}
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        return [{k: _first(alts) for k, alts in d.items() if alts and alts[0] != ""} for d in v]
    return v


def reference_call(sample: Sample) -> tuple[str, dict]:
    gt = sample.data["ground_truth"][0]
    name = next(iter(gt))
    args = {k: _first(alts) for k, alts in gt[name].items() if alts[0] != ""}
    return name, args


@pytest.fixture(scope="module")
def bench():
    return get_benchmark("bfcl")


@pytest.fixture(scope="module")
def samples(bench):
    from posttrainbench.benchmarks.datafiles import read_split
    from tests.data_fixtures import prepared

    return read_split("bfcl", "test", prepared("bfcl"))


# ---------- decoding ----------


def test_decode_list_and_bare_call():
    assert decode_calls("[f(a=1, b='x')]") == [{"f": {"a": 1, "b": "x"}}]
    assert decode_calls("f(a=-2.5)") == [{"f": {"a": -2.5}}]
    assert decode_calls("```\n[m.sub.g(x=[1, 2], y={'k': True})]\n```") == [
        {"m.sub.g": {"x": [1, 2], "y": {"k": True}}}
    ]
    assert decode_calls("[f(a=2**3, b=1/4)]") == [{"f": {"a": 8, "b": 0.25}}]


@pytest.mark.parametrize(
    "text", ["The answer is 5.", "[f(a=1)] because", "[1, 2]", "x = f(a=1)", "f(**kw)"]
)
def test_decode_rejects_non_calls(text):
    with pytest.raises(DecodeError):
        decode_calls(text)


def test_standardize_string():
    assert standardize_string("New York, NY") == standardize_string("new york ny")
    assert standardize_string("April 1, 2024") == standardize_string("April 1 2024")


@pytest.mark.parametrize(
    "prefix,hopeless",
    [
        ("", False),
        ("[", False),
        ("[math.fact", False),
        ("f (", False),
        ("(f(", False),
        ("[f(a=1)]\n```", False),
        ("[f(a=']')]", False),
        ("[f(a=1)] This", True),
        ("[f(a=1)]\n\nNote", True),
        ("The area", True),
        ("Sure!", True),
        ("```python\n[", True),
        ("x = 1", True),
        ("'[f(a=1)]'", True),
    ],
)
def test_cannot_become_call(prefix, hopeless):
    assert cannot_become_call(prefix) is hopeless


def test_hopeless_prefixes_never_decode():
    """The early-stop rule only fires on text that BFCL decoding rejects anyway."""
    for text in [
        "[f(a=1)] is the call",
        "[f(a=1)]\n\n```python\n",
        "The area is 5",
        "python\n[f(a=1)]",
        "x = f(a=1)",
        "Sure! [f(a=1)]",
        "1. f(a=1)",
    ]:
        assert cannot_become_call(text)
        with pytest.raises(DecodeError):
            decode_calls(text)


# ---------- checker on synthetic schema ----------

FUNC = {
    "name": "geo.distance",
    "description": "d",
    "parameters": {
        "type": "dict",
        "properties": {
            "origin": {"type": "string", "description": ""},
            "km": {"type": "float", "description": ""},
            "stops": {"type": "array", "items": {"type": "string"}, "description": ""},
            "fast": {"type": "boolean", "description": ""},
            "n": {"type": "integer", "description": ""},
        },
        "required": ["origin", "km"],
    },
}
GT = [
    {
        "geo.distance": {
            "origin": ["New York, NY", "NYC"],
            "km": [10.0],
            "stops": [["Boston", "DC"], ""],
            "fast": [True, ""],
            "n": [3, ""],
        }
    }
]


def _check(text: str):
    return check_simple_call(FUNC, decode_calls(text), GT)


@pytest.mark.parametrize(
    "text",
    [
        "[geo.distance(origin='New York, NY', km=10.0)]",
        "[geo.distance(origin='new york ny', km=10)]",  # int accepted for float; string normalised
        "[geo.distance(origin='NYC', km=10.0, stops=['boston', 'D.C.'], fast=True, n=3)]",
    ],
)
def test_checker_accepts(text):
    assert _check(text).valid


@pytest.mark.parametrize(
    "text,error",
    [
        ("[geo.dist(origin='NYC', km=10.0)]", "wrong_func_name"),
        ("[geo.distance(origin='NYC')]", "missing_required"),
        ("[geo.distance(origin='NYC', km=10.0, speed=3)]", "unexpected_param"),
        ("[geo.distance(origin='Boston', km=10.0)]", "value_error:string"),
        ("[geo.distance(origin='NYC', km='10')]", "type_error"),
        ("[geo.distance(origin='NYC', km=10.0, n=3.0)]", "type_error"),
        ("[geo.distance(origin='NYC', km=10.0, fast=1)]", "type_error"),
        ("[geo.distance(origin='NYC', km=10.0, stops=['DC', 'Boston'])]", "value_error:list"),
        (
            "[geo.distance(origin='NYC', km=10.0), geo.distance(origin='NYC', km=10.0)]",
            "wrong_count",
        ),
    ],
)
def test_checker_rejects(text, error):
    result = _check(text)
    assert not result.valid and result.error_type == error


def test_missing_non_optional_param():
    gt = [{"geo.distance": {"origin": ["NYC"], "km": [10.0], "n": [3]}}]
    assert (
        check_simple_call(
            FUNC, decode_calls("[geo.distance(origin='NYC', km=10.0)]"), gt
        ).error_type
        == "missing_optional"
    )


# ---------- real BFCL questions ----------


def test_loads_400_questions(samples):
    assert len(samples) == 400
    assert samples[0].id == "simple_python_0"


def test_ground_truth_scores_correct(bench, samples):
    for s in samples:
        if s.id in UNSATISFIABLE:
            continue
        name, args = reference_call(s)
        result = bench.score(s, "[" + format_call(name, args) + "]")
        assert result.correct, (s.id, result)


def test_mutations_score_incorrect(bench, samples):
    rng = random.Random(0)
    for s in rng.sample([s for s in samples if s.id not in UNSATISFIABLE], 60):
        name, args = reference_call(s)
        call = format_call(name, args)
        func = s.data["function"][0]
        required = func["parameters"].get("required", [])
        assert not bench.score(s, "[" + format_call(name + "_x", args) + "]").correct
        assert not bench.score(s, f"[{call}, {call}]").correct
        assert not bench.score(s, f"Sure, here you go: [{call}]").correct
        assert not bench.score(s, f"[{call}]\nThis computes the answer.").correct
        assert not bench.score(s, "[" + format_call(name, {**args, "bogus_param": 1}) + "]").correct
        if required and required[0] in args:
            missing = {k: v for k, v in args.items() if k != required[0]}
            assert not bench.score(s, "[" + format_call(name, missing) + "]").correct
        for key, value in args.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                wrong_value = {**args, key: value + 7919}
                wrong_type = {**args, key: str(value) + "x"}
            elif isinstance(value, str):
                wrong_value = {**args, key: value + " zzq"}
                wrong_type = {**args, key: 12345}
            else:
                continue
            assert not bench.score(s, "[" + format_call(name, wrong_value) + "]").correct, (
                s.id,
                key,
            )
            assert not bench.score(s, "[" + format_call(name, wrong_type) + "]").correct, (
                s.id,
                key,
            )
            break


# ---------- prompt and registry ----------


def test_prompt_lists_function_and_question(bench, samples):
    s = samples[0]
    messages = bench.build_messages(s)
    assert messages[0]["role"] == "system" and '"calculate_triangle_area"' in messages[0]["content"]
    assert "[func_name(" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": s.data["question"][0]["content"]}
    text = render_chat(messages)  # tokenizer-free fallback: ChatML
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")


def test_unknown_benchmark():
    with pytest.raises(UnknownBenchmarkError):
        get_benchmark("nope")


# ---------- parity with bfcl-eval's own checker ----------


def _import_bfcl_checker():
    """bfcl-eval's ast_checker, importable only with its model registry stubbed out."""
    if not HAS_BFCL:
        return None
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = collections.defaultdict(
        lambda: types.SimpleNamespace(underscore_to_dot=False)
    )
    saved = sys.modules.get("bfcl_eval.constants.model_config")
    sys.modules["bfcl_eval.constants.model_config"] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval import ast_checker as mod
    except Exception:
        return None
    finally:
        if saved is not None:
            sys.modules["bfcl_eval.constants.model_config"] = saved
    return mod, Language


def _mutants(rng: random.Random, name: str, args: dict) -> list[str]:
    out = ["[" + format_call(name, args) + "]", format_call(name, args)]
    keys = list(args)
    if keys:
        k = rng.choice(keys)
        v = args[k]
        out.append("[" + format_call(name, {kk: vv for kk, vv in args.items() if kk != k}) + "]")
        if isinstance(v, bool):
            out.append("[" + format_call(name, {**args, k: not v}) + "]")
        elif isinstance(v, int):
            out += [
                "[" + format_call(name, {**args, k: float(v)}) + "]",
                "[" + format_call(name, {**args, k: v + 1}) + "]",
            ]
        elif isinstance(v, float):
            out += [
                "[" + format_call(name, {**args, k: int(v)}) + "]",
                "[" + format_call(name, {**args, k: v * 2}) + "]",
            ]
        elif isinstance(v, str):
            out += [
                "[" + format_call(name, {**args, k: v.upper()}) + "]",
                "[" + format_call(name, {**args, k: v[:-1]}) + "]",
                "[" + format_call(name, {**args, k: len(v)}) + "]",
            ]
        elif isinstance(v, list):
            out += [
                "[" + format_call(name, {**args, k: list(reversed(v))}) + "]",
                "[" + format_call(name, {**args, k: tuple(v)}) + "]",
            ]
    out.append("[" + format_call(name, {**args, "extra": 1}) + "]")
    out.append("[" + format_call(name.split(".")[-1] + "_", args) + "]")
    return out


@needs_bfcl
def test_parity_with_bfcl_checker(bench, samples):
    imported = _import_bfcl_checker()
    if imported is None:
        pytest.skip("bfcl-eval's ast_checker is not importable here")
    mod, Language = imported
    rng = random.Random(1)
    compared = 0
    for s in rng.sample(samples, 60):
        name, args = reference_call(s)
        for text in _mutants(rng, name, args):
            try:
                decoded = decode_calls(text)
            except DecodeError:
                continue
            ours = check_simple_call(s.data["function"][0], decoded, s.data["ground_truth"])
            theirs = mod.ast_checker(
                s.data["function"],
                decoded,
                s.data["ground_truth"],
                Language.PYTHON,
                "simple_python",
                "ptb",
            )
            assert ours.valid == theirs["valid"], (s.id, text, ours, theirs)
            compared += 1
    assert compared >= 200


# ---------- synthetic training data (training/synth_fc.py) ----------


def test_synthetic_targets_are_valid_calls_for_their_schema():
    from posttrainbench.training.synth_fc import make_dataset

    data = make_dataset(300, seed=3)
    assert make_dataset(5, seed=3) == data[:5]  # seeded
    for ex in data:
        func = ex["functions"][0]
        [call] = decode_calls(ex["answer"])
        args = call[func["name"]]
        props = func["parameters"]["properties"]
        assert set(func["parameters"]["required"]) <= set(args) <= set(props)
        truth = [
            {
                func["name"]: {k: [v] for k, v in args.items()}
                | {k: [""] for k in props if k not in args}
            }
        ]
        assert check_simple_call(func, [call], truth).valid, ex


def test_synthetic_data_shares_no_question_with_bfcl(samples):
    from posttrainbench.training.synth_fc import make_dataset

    test_questions = {s.data["question"][0]["content"].strip().lower() for s in samples}
    assert not any(
        ex["question"][0]["content"].strip().lower() in test_questions for ex in make_dataset(2000)
    )
