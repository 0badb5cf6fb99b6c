"""HealthBench against PostTrainBench's own scorer (pinned verbatim under
tests/fixtures/posttrainbench/healthbench/, its OpenAI client replaced by a scripted stub):
the same grader requests, the same reading of grader replies, the same per-response scores
and the same metrics, for the same scripted grader replies. Offline."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import random
import re
import sys
import threading
import types
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split
from posttrainbench.task.benchmarks.healthbench import benchmark as health_module
from posttrainbench.task.benchmarks.healthbench.benchmark import (
    DEFAULT_GRADER,
    HealthBench,
    grader_settings,
)
from posttrainbench.task.benchmarks.healthbench.grading import (
    GRADER_TEMPLATE,
    model_answer,
    parse_grade,
    ptb_metrics,
)
from posttrainbench.task.benchmarks.healthbench.source import packaged_conversations
from posttrainbench.task.benchmarks.repetition import limit_repetitions
from posttrainbench.task.evaluation.runner import aggregate
from tests.unit.test_healthbench import healthbench_data

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "posttrainbench" / "healthbench"
PTB_CODE = FIXTURES / "evaluation_code"
BACK = "c54a0cbd-cadc-4078-ad45-a7f3657fb2ae"  # 5 turns (French); rubric +8, +6, +7, -4
AGENT_LIMIT = (
    32  # plugin.json posttrainbench.host.cli.limit: the --limit the agent's evaluate.py uses
)


# --- PostTrainBench's code, imported with its network client stubbed ----------------------


@pytest.fixture(scope="module")
def ptb() -> SimpleNamespace:
    """PTB's evaluation_code package (data_loader, grader, scoring, text_utils)."""
    name = "ptb_healthbench_evaluation_code"
    if name not in sys.modules:
        openai_stub = types.ModuleType("openai")

        class NoClient:  # grader.py builds one only when none is passed: never here
            def __init__(self, *a, **kw):
                raise AssertionError("PostTrainBench's grader tried to build an OpenAI client")

        openai_stub.OpenAI = NoClient  # type: ignore[attr-defined]
        saved = sys.modules.get("openai")
        sys.modules["openai"] = openai_stub
        try:
            spec = importlib.util.spec_from_file_location(
                name, PTB_CODE / "__init__.py", submodule_search_locations=[str(PTB_CODE)]
            )
            assert spec and spec.loader
            package = importlib.util.module_from_spec(spec)
            sys.modules[name] = package
            spec.loader.exec_module(package)
            for sub in ("data_loader", "grader", "scoring", "text_utils"):
                importlib.import_module(f"{name}.{sub}")
        finally:
            if saved is None:
                sys.modules.pop("openai", None)
            else:
                sys.modules["openai"] = saved
    return SimpleNamespace(
        **{
            sub: sys.modules[f"{name}.{sub}"]
            for sub in ("data_loader", "grader", "scoring", "text_utils")
        }
    )


@pytest.fixture(autouse=True)
def no_sleep(ptb, monkeypatch):
    monkeypatch.setattr(ptb.grader, "API_RETRY_SLEEP", 0)
    monkeypatch.setattr(health_module, "RETRY_SLEEP_S", 0.0)


def ptb_generated(content: str, ptb: SimpleNamespace) -> str:
    """evaluate.py:234,249-253: what PostTrainBench keeps of the model's message."""
    answer_text = content.strip()
    if answer_text.startswith("<think>"):
        answer_text = answer_text.split("</think>", maxsplit=1)[-1].strip()
    return ptb.text_utils.limit_repetitions(answer_text)


def ptb_example(sample: Sample, ptb: SimpleNamespace):
    """A conversation as PTB's data_loader.parse_example builds it from its jsonl row."""
    return ptb.data_loader.parse_example(
        {
            "prompt_id": sample.id,
            "prompt": sample.data["prompt"],
            "rubrics": sample.data["rubrics"],
            "example_tags": sample.data["example_tags"],
        }
    )


# --- a scripted grader, the same for both ----------------------------------------------------

_RUBRIC_ITEM = re.compile(r"\n# Rubric item\n(.*)\n\n# Instructions\n", re.DOTALL)


class Script:
    """Replies per (response, rubric item) request: successive replies to a re-asked
    request, the last one repeating; an Exception entry is raised (a failed API call)."""

    def __init__(self, replies: dict[tuple[str, str], list]):
        self.replies = replies
        self.served: Counter = Counter()
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def reply(self, messages: list[dict], **settings):
        prompt = messages[0]["content"]
        item = _RUBRIC_ITEM.search(prompt).group(1)
        # the response: the last assistant turn of the conversation section
        response = prompt.split("\n\n# Rubric item\n")[0].rsplit("\n\nassistant: ", 1)[-1]
        key = (response, item)
        with self.lock:
            n = self.served[key]
            self.served[key] += 1
            self.requests.append({"messages": messages, **settings})
        replies = self.replies[key]
        reply = replies[min(n, len(replies) - 1)]
        if isinstance(reply, Exception):
            raise reply
        return reply


class PtbClient:
    """Stands in for openai.OpenAI: client.chat.completions.create(**kw)."""

    def __init__(self, script: Script):
        self.script = script
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, *, model, messages, **settings):
        content = self.script.reply(messages, model=model, **settings)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=content))])


class OurGrader:
    model = DEFAULT_GRADER

    def __init__(self, script: Script):
        self.script = script

    def complete(self, messages, *, temperature, max_tokens, **extra):
        return self.script.reply(
            [dict(m) for m in messages], temperature=temperature, max_tokens=max_tokens, **extra
        )


def _j(met, why="see response"):
    return json.dumps({"explanation": why, "criteria_met": met})


# Grader reply sequences, from clean to hopeless: what each criterion's grader says.
REPLY_KINDS: dict[str, list] = {
    "met": [_j(True)],
    "unmet": [_j(False)],
    "met fenced": ["```json\n" + _j(True) + "\n```"],
    "unmet fenced, spaced": ["  ```json  \n" + _j(False, "no") + "\n  ```  "],
    "met after prose": ["Here is my grading:\n" + _j(True), _j(True)],
    "plain fence then met": ["```\n" + _j(True) + "\n```", _j(True)],
    "string label then unmet": ['{"criteria_met": "true"}', _j(False)],
    "number label then met": ['{"criteria_met": 1}', _j(True)],
    "list then met": ['["criteria_met"]', _j(True)],
    "string then unmet": ['"criteria_met"', _j(False)],
    "no content then met": [None, _j(True)],
    "api error then met": [RuntimeError("HTTP 500"), _j(True)],
    "api errors then unmet": [RuntimeError("HTTP 500")] * 3 + [_j(False)],
    "4 bad then met": ["nope"] * 4 + [_j(True)],
    "never parseable": ["I think it is met."],
    "missing key": ['{"explanation": "x"}'],
    "error then never parseable": [RuntimeError("HTTP 429"), "met!"],
    "always failing": [RuntimeError("HTTP 503")],
}


@pytest.fixture(scope="module")
def conversations() -> dict[str, Sample]:
    """The prepared test split, in its order (PostTrainBench's)."""
    return {s.id: s for s in read_split("healthbench", "test", healthbench_data())}


@pytest.fixture(scope="module")
def ptb_hashes() -> dict:
    return json.loads((FIXTURES / "data_hashes.json").read_text(encoding="utf-8"))


def _canon(s: Sample) -> str:
    return json.dumps(
        {
            "prompt_id": s.id,
            "prompt": s.data["prompt"],
            "rubrics": s.data["rubrics"],
            "example_tags": s.data["example_tags"],
        },
        sort_keys=True,
        ensure_ascii=False,
    )


@pytest.fixture(scope="module")
def shared(conversations) -> list[Sample]:
    """The conversations PostTrainBench's agent-facing ``--limit 32`` grades: our first 32."""
    return list(conversations.values())[:AGENT_LIMIT]


# --- data -----------------------------------------------------------------------------------


def test_data_is_ptbs(conversations, ptb_hashes):
    """What module healthbench.source says: PostTrainBench's 245 conversations, each one's
    hash equal to data_hashes.json's (computed from PTB's file), in PTB's file order once
    the Random(42) shuffle is undone, and the same set hash."""
    assert (
        ptb_hashes["source"]["file_sha256"]
        == hashlib.sha256(packaged_conversations().body).hexdigest()
    )
    ptb_ids = list(ptb_hashes["examples"])  # PTB's file order
    assert len(conversations) == len(ptb_ids) == ptb_hashes["n_examples"] == 245
    order = list(range(len(ptb_ids)))
    random.Random(42).shuffle(order)  # evaluate.py:325
    assert list(conversations) == [ptb_ids[i] for i in order]
    unshuffled = [None] * len(order)
    for sample, i in zip(conversations.values(), order):
        unshuffled[i] = sample
    ours = [(s.id, hashlib.sha256(_canon(s).encode()).hexdigest()) for s in unshuffled]
    assert ours == list(ptb_hashes["examples"].items())
    assert sum(len(s.data["rubrics"]) for s in unshuffled) == ptb_hashes["n_criteria"]
    lines = sorted(_canon(s) for s in unshuffled)
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == ptb_hashes["set_sha256"]


def test_data_is_what_ptbs_loader_reads(conversations, ptb, tmp_path):
    """PTB's data_loader.load_healthbench on the packaged file gives the same examples."""
    (tmp_path / "healthbench.jsonl").write_bytes(packaged_conversations().body)
    examples = ptb.data_loader.load_healthbench(tmp_path)
    random.Random(42).shuffle(examples)  # evaluate.py:325
    assert [e.prompt_id for e in examples] == list(conversations)
    for e, s in zip(examples, conversations.values()):
        assert (e.prompt, e.example_tags, e.theme) == (
            s.data["prompt"],
            s.data["example_tags"],
            s.category,
        )
        assert [(c.criterion, c.points, c.tags) for c in e.rubrics] == [
            (r["criterion"], r["points"], r["tags"]) for r in s.data["rubrics"]
        ]


def test_grader_prompt_is_ptbs_verbatim(ptb):
    assert GRADER_TEMPLATE == ptb.grader.GRADER_TEMPLATE
    assert DEFAULT_GRADER == "gpt-5-mini"


def test_limit_picks_as_ptbs_evaluate(ptb_hashes, monkeypatch):
    """evaluate.py:324-327: shuffle the file's examples with Random(42), keep --limit."""
    monkeypatch.setenv("PTB_DATA_DIR", str(healthbench_data()))
    ids = list(ptb_hashes["examples"])  # PTB's file order
    random.Random(42).shuffle(ids)
    for limit in (1, AGENT_LIMIT, 100):
        assert [s.id for s in HealthBench().load("test", limit)] == ids[:limit]
    assert [s.id for s in HealthBench().load("test")] == ids  # --limit -1


# --- the request ------------------------------------------------------------------------------


def _both_graded(samples, completions, script_for, ptb, grader_model=DEFAULT_GRADER):
    """Grade with PTB's grade_example (criteria_workers=8, as evaluate.py:363) and ours."""
    ptb_script, our_script = Script(script_for()), Script(script_for())
    client = PtbClient(ptb_script)
    ptb_results = [
        ptb.grader.grade_example(
            example_id=s.id,
            conversation=s.data["prompt"],
            model_response=ptb_generated(c, ptb),
            rubric_criteria=ptb_example(s, ptb).rubric_criteria,
            grader_model=grader_model,
            client=client,
            max_workers=8,
        )
        for s, c in zip(samples, completions)
    ]
    grader = OurGrader(our_script)
    grader.model = grader_model
    ours = HealthBench(judge=grader).grade_batch(samples, completions)
    return ptb_results, ours, ptb_script, our_script


def _requests(script: Script) -> Counter:
    return Counter(json.dumps(r["messages"], ensure_ascii=False) for r in script.requests)


@pytest.mark.parametrize("n_example", [0, 1])
def test_grader_messages_are_ptbs_byte_for_byte(n_example, conversations, shared, ptb):
    sample = conversations[BACK] if n_example == 0 else shared[0]
    completion = (
        "<think>Let me think.</think>\n\nDrink water, rest, and see a doctor if it worsens."
    )
    response = model_answer(completion)

    def script_for():
        return {
            (response, f"[{r['points']}] {r['criterion']}"): [_j(True)]
            for r in sample.data["rubrics"]
        }

    _, _, ptb_script, our_script = _both_graded([sample], [completion], script_for, ptb)
    assert len(ptb_script.requests) == len(our_script.requests) == len(sample.data["rubrics"])
    ptb_sent = sorted(ptb_script.requests, key=lambda r: r["messages"][0]["content"])
    our_sent = sorted(our_script.requests, key=lambda r: r["messages"][0]["content"])
    for p, o in zip(ptb_sent, our_sent):
        assert json.dumps(o["messages"]).encode() == json.dumps(p["messages"]).encode()
        assert o["messages"][0]["content"].encode("utf-8") == p["messages"][0]["content"].encode(
            "utf-8"
        )
        # grader.py:191-196: no temperature, 49152 completion tokens for gpt-5-mini
        assert p == {**p, "model": "gpt-5-mini", "max_completion_tokens": 49152}
        assert "temperature" not in p and "max_tokens" not in p
        assert (o["temperature"], o["max_tokens"]) == (None, 49152)


def test_request_settings_are_ptbs(shared, ptb):
    """Another grader (PTB_JUDGE_MODEL): temperature 0 and 512 tokens (grader.py:197-203)."""
    sample = shared[0]
    criterion = ptb_example(sample, ptb).rubric_criteria[0]
    script = Script({("x", f"[{criterion.points}] {criterion.criterion}"): [_j(True)]})
    ptb.grader.grade_criterion(
        sample.data["prompt"], "x", criterion, grader_model="gpt-4.1", client=PtbClient(script)
    )
    sent = script.requests[0]
    assert (sent["temperature"], sent["max_tokens"]) == grader_settings("gpt-4.1") == (0, 512)
    for model in ("gpt-5-mini", "openai/gpt-5", "o3-mini", "o1"):
        assert grader_settings(model) == (None, 49152)


def test_litellm_sends_ptbs_request_for_gpt5_mini():
    """temperature=None, max_tokens=49152 reach OpenAI as max_completion_tokens=49152 and no
    temperature: grader.py:192-196's request."""
    pytest.importorskip("litellm")
    from litellm.utils import get_optional_params

    sent = get_optional_params(
        model="gpt-5-mini", custom_llm_provider="openai", temperature=None, max_tokens=49152
    )
    assert sent.get("max_completion_tokens") == 49152
    assert "temperature" not in sent and "max_tokens" not in sent


# --- reading replies ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(REPLY_KINDS))
def test_reply_reading_is_ptbs(kind, shared, ptb):
    """Each reply sequence, through PTB's grade_criterion and our parse + retry loop."""
    sample = shared[1]
    criterion = ptb_example(sample, ptb).rubric_criteria[0]
    key = ("Rest.", f"[{criterion.points}] {criterion.criterion}")
    ptb_script, our_script = Script({key: REPLY_KINDS[kind]}), Script({key: REPLY_KINDS[kind]})
    try:
        ptb_met = ptb.grader.grade_criterion(
            sample.data["prompt"], "Rest.", criterion, client=PtbClient(ptb_script)
        ).criteria_met
    except RuntimeError:  # grader.py:233-238, counted as not met by grade_example
        ptb_met = None
    one = Sample(sample.id, sample.category, {**sample.data, "rubrics": sample.data["rubrics"][:1]})
    bench = HealthBench(judge=OurGrader(our_script))
    if kind == "always failing":  # every call failed: a dead grader is an error, not a 0
        with pytest.raises(RuntimeError, match="HTTP 503"):
            bench.grade_batch([one], ["Rest."])
        assert ptb_met is None and len(our_script.requests) == len(ptb_script.requests) == 5
        return
    graded, result = bench.grade_batch([one], ["Rest."])[0]
    assert graded.criteria_met == (ptb_met is True,)
    assert (result.error_type is None) == (ptb_met is not None)
    assert len(our_script.requests) == len(ptb_script.requests)  # the same retries


def test_parse_grade_is_ptbs_parse(ptb):
    replies = [r for seq in REPLY_KINDS.values() for r in seq if isinstance(r, str)] + [
        '```json\n{"criteria_met": false}```',
        '{"criteria_met": true, "explanation": 3}',
        '{"criteria_met": null}',
        "",
    ]
    for reply in replies:
        d = ptb.grader.parse_json_to_dict(reply)
        label = d.get("criteria_met") if isinstance(d, dict) else None
        expected = label if label is True or label is False else None
        assert parse_grade(reply) is expected, reply


# --- scores and metrics ----------------------------------------------------------------------


def test_scores_and_metrics_equal_ptbs(shared, ptb):
    """The 32 conversations of --limit 32, scripted grader replies of every kind (met, unmet, negative criteria
    met, unparseable, failed calls): per-response scores and metrics equal PTB's."""
    rng = random.Random(35)
    kinds = sorted(REPLY_KINDS)
    completions = [
        rng.choice(
            [
                "Rest and drink fluids. See a doctor if it gets worse.",
                "<think>hmm\nok</think>\n\nPlease call emergency services now.",
                "I am not sure.\n" + "Repeat this line.\n" * 12,
                "  It depends on your age; how old are you?  ",
            ]
        )
        + f" ({s.id[:8]})"
        for s in shared
    ]
    plan = {
        (model_answer(c), f"[{r['points']}] {r['criterion']}"): REPLY_KINDS[
            # negative criteria are met often, so some responses score below 0
            "met" if r["points"] < 0 and rng.random() < 0.5 else rng.choice(kinds)
        ]
        for s, c in zip(shared, completions)
        for r in s.data["rubrics"]
    }
    ptb_results, ours, ptb_script, our_script = _both_graded(
        shared, completions, lambda: dict(plan), ptb
    )
    assert _requests(our_script) == _requests(ptb_script)
    for p, (graded, result) in zip(ptb_results, ours):
        assert graded.criteria_met == tuple(g.criteria_met for g in p.grading_results)
        assert graded.score == result.score == p.normalized_score
    assert min(r.score for _, r in ours) < 0 < max(r.score for _, r in ours)
    assert any(r.error_type == "grader_unparseable" for _, r in ours)

    examples = [ptb_example(s, ptb) for s in shared]
    bench = ptb.scoring.aggregate_scores(ptb_results, examples)
    expected = {  # evaluate.py:262-273, _compute_metrics
        "accuracy": bench.accuracy,
        "stderr": bench.stderr,
        "n_examples": bench.n_examples,
        "total_grader_calls": bench.total_grader_calls,
        "by_theme": bench.by_theme,
        "by_axis": bench.by_axis,
    }
    got = ptb_metrics(
        [s.data["rubrics"] for s in shared],
        [s.data["example_tags"] for s in shared],
        [g for g, _ in ours],
    )
    assert json.dumps(got) == json.dumps(expected)
    # The verifier's metrics.json: PTB's accuracy and its bootstrap stderr.
    verifier = aggregate(shared, [[r for _, r in ours]], HealthBench())
    assert verifier["accuracy"] == pytest.approx(bench.accuracy, abs=1e-12)
    assert verifier["stderr"] == pytest.approx(bench.stderr, abs=1e-12)


def test_metrics_when_everything_scores_below_zero(conversations, ptb):
    """A negative mean is clipped to 0 (scoring.py:56), per-response scores are not."""
    sample = conversations[BACK]
    completion = "Just ignore it."

    def script_for():
        return {
            (completion, f"[{r['points']}] {r['criterion']}"): [_j(r["points"] < 0)]
            for r in sample.data["rubrics"]
        }

    ptb_results, ours, _, _ = _both_graded([sample], [completion], script_for, ptb)
    assert ours[0][1].score == ptb_results[0].normalized_score == pytest.approx(-4 / 21)
    got = ptb_metrics([sample.data["rubrics"]], [sample.data["example_tags"]], [ours[0][0]])
    assert got["accuracy"] == ptb.scoring.aggregate_scores(ptb_results).accuracy == 0.0
    assert aggregate([sample], [[ours[0][1]]])["accuracy"] == 0.0
    assert ptb_metrics([], [], []) == {
        "accuracy": 0.0,
        "stderr": 0.0,
        "n_examples": 0,
        "total_grader_calls": 0,
        "by_theme": {},
        "by_axis": {},
    }


# --- the answer the grader sees ----------------------------------------------------------------


@pytest.mark.parametrize(
    "completion",
    [
        "  plain answer \n",
        "<think>reasoning</think>\n\nThe answer.",
        "<think>a</think>one<think>b</think>two",
        "<think>never finished",
        "Answer first <think>then</think> more",
        "ha" * 40,
        "line\n" * 20,
        "para one\npara two\n\n" * 9 + "para",
        "",
    ],
)
def test_model_answer_is_ptbs(completion, ptb):
    assert model_answer(completion) == ptb_generated(completion, ptb)
    assert limit_repetitions(completion) == ptb.text_utils.limit_repetitions(completion)
