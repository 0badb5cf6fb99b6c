"""BFCL parity with PostTrainBench's run: inspect_evals 0.3.103 ``bfcl()`` on inspect-ai 0.3.150.

Uses the real task code (skipped where inspect_evals / inspect_ai are not installed):

* the dataset: ``bfcl()`` is built with its ``hf_dataset`` call intercepted (no network)
  and fed the local exec_simple records laid out as the Hugging Face file (v3: inline
  ground truth), read with pyarrow's JSON reader as ``datasets`` reads them; the call's
  arguments must name the dataset our source stands for;
* the prompt: every sample's messages and tools, as ``bfcl_solver`` sets them and
  inspect's OpenAI conversion sends them, equal ours (the tool JSON byte for byte: its
  key order is what the chat template prints);
* the verdict: inspect's ``bfcl_scorer`` run on TaskStates whose assistant message
  carries the tool calls vLLM's hermes parser extracts (our port of it, checked on
  hand-written cases in test_bfcl_scorer.py) turned into inspect ToolCalls by
  inspect's own ``parse_tool_call``, equals our scorer's on hand-written completions.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
from pathlib import Path

import pytest

from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.bfcl import source as our_source
from posttrainbench.task.benchmarks.bfcl.hermes import extract_tool_calls
from posttrainbench.task.benchmarks.bfcl.scoring import parse_target
from posttrainbench.task.benchmarks.bfcl.tools import openai_tools
from posttrainbench.task.training.synth_fc import tool_call_text

ie_bfcl = pytest.importorskip("inspect_evals.bfcl.bfcl")
paj = pytest.importorskip("pyarrow.json")
ChatMessageAssistant = importlib.import_module("inspect_ai.model").ChatMessageAssistant
ModelName = importlib.import_module("inspect_ai.model").ModelName
parse_tool_call = importlib.import_module("inspect_ai.model._call_tools").parse_tool_call
Target = importlib.import_module("inspect_ai.scorer").Target
TaskState = importlib.import_module("inspect_ai.solver").TaskState

REORDERED_BY_ARROW = {f"exec_simple_{i}" for i in (70, 71, 76, 77, 88, 89, 92, 93)}


def _wheel_records() -> list[dict]:
    """The bfcl-eval wheel's exec_simple, joined back into the v3 (HF) record layout."""
    import bfcl_eval

    root = Path(bfcl_eval.__file__).parent / "data" / "unused_datasets"
    name = our_source.NAME

    def rows(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    answers = {a["id"]: a for a in rows(root / "possible_answer" / name)}
    return [
        {
            "id": q["id"],
            "question": q["question"],
            "function": q["function"],
            "execution_result_type": answers[q["id"]]["execution_result_type"],
            "ground_truth": answers[q["id"]]["ground_truth"],
        }
        for q in rows(root / "question" / name)
    ]


def _as_hf_loads(records: list[dict]) -> list[dict]:
    """What ``datasets``' JSON builder yields: pyarrow's reader, then rows as dicts."""
    body = "\n".join(json.dumps(r) for r in records).encode()
    return paj.read_json(io.BytesIO(body)).to_pylist()


@pytest.fixture(scope="module")
def inspect_task(request):
    """``bfcl()`` with its hf_dataset call answered locally; (task, call kwargs)."""
    from inspect_ai.dataset import MemoryDataset

    calls: list[tuple[tuple, dict]] = []
    records = _as_hf_loads(_wheel_records())

    def fake_hf_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        to_sample = kwargs["sample_fields"]
        return MemoryDataset([to_sample(r) for r in records])

    mp = pytest.MonkeyPatch()
    mp.setattr(ie_bfcl.dataset, "hf_dataset", fake_hf_dataset)
    request.addfinalizer(mp.undo)
    task = ie_bfcl.bfcl()
    return task, calls


@pytest.fixture(scope="module")
def ours():
    from posttrainbench.task.benchmarks.datafiles import read_split
    from tests.data_fixtures import prepared

    return read_split("bfcl", "test", prepared("bfcl"))


@pytest.fixture(scope="module")
def bench():
    return get_benchmark("bfcl")


def _run(coro):
    return asyncio.run(coro)


# inspect-ai 0.3.150 model/_openai.py, restated because the task venv has no ``openai``
# package (its TypedDicts are plain dicts with these keys, in this order):
def openai_chat_tools(tools) -> list[dict]:
    """``openai_chat_tools`` / ``openai_chat_tool_param``."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters.model_dump(exclude_none=True),
            },
        }
        for tool in tools
    ]


def messages_to_openai(messages) -> list[dict]:
    """``openai_chat_message`` for the only kind BFCL sends: user text."""
    assert all(m.role == "user" and isinstance(m.content, str) for m in messages)
    return [{"role": m.role, "content": m.content} for m in messages]


def test_same_dataset_identity(inspect_task):
    _, calls = inspect_task
    [(args, kwargs)] = calls
    assert args == (our_source.HF_DATASET,)
    assert kwargs["name"] == our_source.HF_NAME and kwargs["split"] == "train"
    assert kwargs["revision"] == our_source.HF_REVISION


def _solver_state(task, sample) -> tuple[TaskState, dict]:
    """Run inspect_evals' solver on *sample* up to the model call; capture it."""
    seen: dict = {}

    async def generate(state, **kwargs):
        seen.update(kwargs)
        return state

    state = TaskState(
        model=ModelName("vllm/final_model"),
        sample_id=sample.id or 0,
        epoch=1,
        input=sample.input,
        messages=list(sample.input),
        metadata=dict(sample.metadata),
    )
    solver = task.solver
    _run(solver(state, generate))
    return state, seen


def test_prompts_equal_inspects(inspect_task, ours, bench):
    task, _ = inspect_task
    samples = list(task.dataset)
    assert len(samples) == len(ours) == 100
    for theirs, mine in zip(samples, ours):
        state, seen = _solver_state(task, theirs)
        assert seen.get("tool_calls") == "none"  # one generation, no tool execution
        sent_messages = messages_to_openai(state.messages)
        assert sent_messages == bench.build_messages(mine), mine.id
        sent_tools = openai_chat_tools(state.tools)
        # vLLM: tool.model_dump() of ChatCompletionToolsParam(type, function(name,
        # description, parameters)); the same keys, so the JSON the template sees is:
        assert json.dumps(sent_tools) == json.dumps(bench.tools(mine)), mine.id
        assert theirs.metadata["target_obj"] == parse_target(mine.data["ground_truth"])


def test_raw_order_differs_only_where_arrow_reorders(ours):
    """Without Hugging Face's Arrow round trip only 8 items' parameter order would differ."""
    differ = set()
    for record, mine in zip(_wheel_records(), ours):
        sample = ie_bfcl.record_to_sample(record)
        raw = openai_chat_tools([ie_bfcl.create_tool_info_from_dict(t) for t in record["function"]])
        assert raw == json.loads(json.dumps(openai_tools(mine.data["function"])))  # same content
        if json.dumps(raw) != mine.data["tools"]:
            differ.add(mine.id)
        assert sample.metadata["target_obj"] == parse_target(mine.data["ground_truth"])
    assert differ == REORDERED_BY_ARROW


# ---------- the verdict: inspect's bfcl_scorer on hand-written completions ----------

SAMPLE_ID = "exec_simple_0"  # calc_binomial_probability(n=20, k=5, p=0.6)
GOOD = '{"name": "calc_binomial_probability", "arguments": {"n": 20, "k": 5, "p": 0.6}}'
COMPLETIONS = {
    "correct call": f"<tool_call>\n{GOOD}\n</tool_call>",
    "correct, ints as floats": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20.0, "k": 5, "p": 0.6}}</tool_call>',
    "correct, keys reordered": '<tool_call>{"arguments": {"p": 0.6, "k": 5, "n": 20}, '
    '"name": "calc_binomial_probability"}</tool_call>',
    "correct, unclosed": f"<tool_call>\n{GOOD}",
    "correct, text before": f"Let me compute that.\n<tool_call>\n{GOOD}\n</tool_call>",
    "correct, text after": f"<tool_call>\n{GOOD}\n</tool_call>\nThat is the call.",
    "correct, think block first": f"<think>n=20, k=5</think>\n<tool_call>{GOOD}</tool_call>",
    "wrong arg": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20, "k": 6, "p": 0.6}}</tool_call>',
    "percent not fraction": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20, "k": 5, "p": 60}}</tool_call>',
    "string number": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": "20", "k": 5, "p": 0.6}}</tool_call>',
    "extra arg": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20, "k": 5, "p": 0.6, "q": 1}}</tool_call>',
    "missing arg": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20, "k": 5}}</tool_call>',
    "wrong name": '<tool_call>{"name": "binomial", "arguments": {"n": 20, "k": 5, "p": 0.6}}'
    "</tool_call>",
    "two calls": f"<tool_call>{GOOD}</tool_call>\n<tool_call>{GOOD}</tool_call>",
    "no call": "The probability is about 0.0746.",
    "python-style call": "[calc_binomial_probability(n=20, k=5, p=0.6)]",
    "malformed JSON": '<tool_call>{"name": "calc_binomial_probability", "arguments": '
    "{'n': 20, 'k': 5, 'p': 0.6}}</tool_call>",
    "malformed second call": f"<tool_call>{GOOD}</tool_call><tool_call>{{oops</tool_call>",
    "empty call": "<tool_call></tool_call>",
    "no arguments key": '<tool_call>{"name": "calc_binomial_probability"}</tool_call>',
    "name not a string": '<tool_call>{"name": 5, "arguments": {}}</tool_call>',
    "a list, not an object": f"<tool_call>[{GOOD}]</tool_call>",
    "arguments as a string": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": "{\\"n\\": 20, \\"k\\": 5, \\"p\\": 0.6}"}</tool_call>',
    "duplicate key, last right": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 19, "n": 20, "k": 5, "p": 0.6}}</tool_call>',
    "duplicate key, last wrong": '<tool_call>{"name": "calc_binomial_probability", '
    '"arguments": {"n": 20, "n": 19, "k": 5, "p": 0.6}}</tool_call>',
}
# Single-parameter functions: a bare (non-object) ``arguments`` goes to the first
# parameter through inspect's YAML fallback.
BARE = {
    "exec_simple_64": [  # math_factorial(n=7)
        ('<tool_call>{"name": "math_factorial", "arguments": 7}</tool_call>', True),
        ('<tool_call>{"name": "math_factorial", "arguments": "7"}</tool_call>', False),
        ('<tool_call>{"name": "math_factorial", "arguments": [7]}</tool_call>', False),
        ('<tool_call>{"name": "math_fact", "arguments": 7}</tool_call>', False),
    ],
    "exec_simple_26": [  # find_term_on_urban_dictionary(term="lit")
        (
            '<tool_call>{"name": "find_term_on_urban_dictionary", "arguments": "lit"}</tool_call>',
            True,
        ),
        (
            '<tool_call>{"name": "find_term_on_urban_dictionary", "arguments": {}}</tool_call>',
            False,
        ),
    ],
}


def _inspect_verdict(sample, completion: str, tools_info) -> bool:
    """inspect's bfcl_scorer on the message inspect builds from vLLM's response."""
    extracted = extract_tool_calls(completion)
    tool_calls = (
        [
            parse_tool_call(f"call_{i}", c.name, c.arguments, tools_info)
            for i, c in enumerate(extracted.tool_calls)
        ]
        if extracted.tools_called and extracted.tool_calls
        else None  # chat_tool_calls_from_openai: no tool calls -> None
    )
    message = ChatMessageAssistant(content=extracted.content or "", tool_calls=tool_calls)
    state = TaskState(
        model=ModelName("vllm/final_model"),
        sample_id=sample.id or 0,
        epoch=1,
        input=sample.input,
        messages=[*sample.input, message],
        metadata=dict(sample.metadata),
    )
    score = _run(ie_bfcl.bfcl_scorer()(state, Target(sample.target)))
    return score.value == "C"


def _pair(inspect_task, ours, sample_id):
    task, _ = inspect_task
    index = next(i for i, s in enumerate(ours) if s.id == sample_id)
    theirs = list(task.dataset)[index]
    state, _ = _solver_state(task, theirs)
    return theirs, ours[index], state.tools


@pytest.mark.parametrize("case", sorted(COMPLETIONS))
def test_verdict_equals_inspect_scorer(inspect_task, ours, bench, case):
    theirs, mine, tools_info = _pair(inspect_task, ours, SAMPLE_ID)
    completion = COMPLETIONS[case]
    expected = _inspect_verdict(theirs, completion, tools_info)
    assert bench.score(mine, completion).correct is expected, case
    assert expected is case.startswith("correct") or case == "duplicate key, last right"


@pytest.mark.parametrize("sample_id", sorted(BARE))
def test_bare_arguments_follow_inspects_yaml_fallback(inspect_task, ours, bench, sample_id):
    theirs, mine, tools_info = _pair(inspect_task, ours, sample_id)
    for completion, correct in BARE[sample_id]:
        assert _inspect_verdict(theirs, completion, tools_info) is correct, completion
        assert bench.score(mine, completion).correct is correct, completion


def test_every_ground_truth_call_is_correct_for_both(inspect_task, ours, bench):
    task, _ = inspect_task
    for theirs, mine in zip(task.dataset, ours):
        target = theirs.metadata["target_obj"]
        completion = tool_call_text(target["function"], target["arguments"])
        state, _ = _solver_state(task, theirs)
        assert _inspect_verdict(theirs, completion, state.tools), mine.id
        assert bench.score(mine, completion).correct, mine.id
