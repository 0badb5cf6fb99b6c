"""LLM judge client: selection, credentials check, retries, recording and replay (host tier:
needs litellm; never calls a live API)."""

from __future__ import annotations

import importlib.util
import json
import re
from types import SimpleNamespace

import pytest

from posttrainbench.task.benchmarks import llm_judge
from posttrainbench.task.benchmarks.llm_judge import (
    JudgeConfigError,
    LitellmJudge,
    MissingRecordingError,
    RecordedJudge,
    RecordingJudge,
    judge_concurrency,
    make_judge,
    parallel_map,
    raise_systemic,
    recording_key,
    strip_thinking,
)

MSGS = [{"role": "system", "content": "judge"}, {"role": "user", "content": "A or B?"}]
ENV_VARS = (
    "PTB_JUDGE_MODEL",
    "PTB_JUDGE_RECORDINGS",
    "PTB_JUDGE_RECORD_TO",
    "PTB_JUDGE_CONCURRENCY",
    "OPENAI_API_KEY",
    "AZURE_API_KEY",
    "ANTHROPIC_API_KEY",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def litellm_mod():
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("litellm not installed")
    return (
        llm_judge._import_litellm()
    )  # the way the judge imports it (local price table, no network)


def _reply(text: str | None) -> SimpleNamespace:
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))])


def _write_recording(path, model, pairs):
    recs = [{"key": recording_key(model, m), "model": model, "response": r} for m, r in pairs]
    path.write_text(json.dumps({"format": llm_judge.RECORDING_FORMAT, "recordings": recs}))
    return path


def test_recording_key_depends_on_model_and_every_message():
    k = recording_key("gpt-4.1", MSGS)
    assert k == recording_key("gpt-4.1", [dict(m) for m in MSGS]) and len(k) == 64
    assert k != recording_key("gpt-4o", MSGS)
    assert k != recording_key("gpt-4.1", [MSGS[0], {"role": "user", "content": "A or B? "}])
    assert k != recording_key("gpt-4.1", MSGS[::-1])


def test_missing_key_fails_once_with_a_clear_error_before_any_call(litellm_mod, monkeypatch):
    calls = []
    monkeypatch.setattr(litellm_mod, "completion", lambda **kw: calls.append(kw))
    with pytest.raises(JudgeConfigError) as exc:
        make_judge("gpt-4.1")
    assert str(exc.value) == (
        "judge model gpt-4.1 needs OPENAI_API_KEY "
        "(set it, or PTB_JUDGE_MODEL to another litellm model)"
    )
    assert calls == []


def test_missing_key_names_the_overridden_model(litellm_mod, monkeypatch):
    monkeypatch.setenv("PTB_JUDGE_MODEL", "anthropic/claude-3-5-sonnet-20240620")
    with pytest.raises(
        JudgeConfigError,
        match=r"judge model anthropic/claude-3-5-sonnet-20240620 needs ANTHROPIC_API_KEY",
    ):
        make_judge("gpt-4.1")


def test_selection_live_model_from_default_or_env(litellm_mod, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    judge = make_judge("gpt-4.1")
    assert isinstance(judge, LitellmJudge) and judge.model == "gpt-4.1"
    monkeypatch.setenv("PTB_JUDGE_MODEL", "gpt-4o-mini")
    assert make_judge("gpt-4.1").model == "gpt-4o-mini"


def test_selection_recordings_need_no_key_and_no_litellm_call(tmp_path, monkeypatch):
    path = _write_recording(tmp_path / "recorded_x.json", "gpt-4.1", [(MSGS, "[[A=B]]")])
    monkeypatch.setenv("PTB_JUDGE_RECORDINGS", str(path))
    judge = make_judge("gpt-4.1")
    assert isinstance(judge, RecordedJudge)
    assert judge.complete(MSGS, temperature=0.0, max_tokens=10) == "[[A=B]]"
    # the key includes the model: the same request for another judge model is not recorded
    monkeypatch.setenv("PTB_JUDGE_MODEL", "gpt-4o")
    with pytest.raises(
        MissingRecordingError, match="no recorded judge response .* for model gpt-4o"
    ):
        make_judge("gpt-4.1").complete(MSGS, temperature=0.0, max_tokens=10)


def test_recorded_judge_missing_recording_error_names_the_request(tmp_path):
    judge = RecordedJudge(_write_recording(tmp_path / "r.json", "m", [(MSGS, "x")]), "m")
    other = [{"role": "user", "content": "an unrecorded question"}]
    with pytest.raises(MissingRecordingError) as exc:
        judge.complete(other, temperature=0.0, max_tokens=10)
    assert "an unrecorded question" in str(exc.value) and recording_key("m", other)[:16] in str(
        exc.value
    )


def test_recorded_judge_replays_retries_in_order(tmp_path):
    path = _write_recording(tmp_path / "r.json", "m", [(MSGS, "garbled"), (MSGS, "[[B>A]]")])
    judge = RecordedJudge(path, "m")
    got = [judge.complete(MSGS, temperature=0.0, max_tokens=10) for _ in range(3)]
    assert got == ["garbled", "[[B>A]]", "[[B>A]]"]


@pytest.mark.parametrize("body", ["{not json", '{"recordings": [{"response": "x"}]}'])
def test_recorded_judge_bad_file_is_a_config_error(tmp_path, body):
    path = tmp_path / "r.json"
    path.write_text(body)
    with pytest.raises(JudgeConfigError, match="cannot read judge recordings"):
        RecordedJudge(path, "m")
    with pytest.raises(JudgeConfigError, match="cannot read judge recordings"):
        RecordedJudge(tmp_path / "absent.json", "m")


def test_litellm_judge_passes_settings_and_returns_text(litellm_mod, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    seen = []
    monkeypatch.setattr(
        litellm_mod, "completion", lambda **kw: seen.append(kw) or _reply("[[A>B]]")
    )
    judge = LitellmJudge("gpt-4.1")
    assert judge.complete(MSGS, temperature=0.0, max_tokens=77) == "[[A>B]]"
    assert seen == [{"model": "gpt-4.1", "messages": MSGS, "temperature": 0.0, "max_tokens": 77}]
    monkeypatch.setattr(
        litellm_mod, "completion", lambda **kw: _reply(None)
    )  # e.g. filtered content
    assert judge.complete(MSGS, temperature=0.0, max_tokens=77) == ""


def test_litellm_judge_retries_transient_errors_only(litellm_mod, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    outcomes = [
        litellm_mod.RateLimitError("slow down", "openai", "gpt-4.1"),
        litellm_mod.InternalServerError("oops", "openai", "gpt-4.1"),
        _reply("ok"),
    ]

    def fake(**kw):
        o = outcomes.pop(0)
        if isinstance(o, Exception):
            raise o
        return o

    monkeypatch.setattr(litellm_mod, "completion", fake)
    sleeps: list[float] = []
    judge = LitellmJudge("gpt-4.1", max_attempts=3, backoff_s=1.0, sleep=sleeps.append)
    assert judge.complete(MSGS, temperature=0.0, max_tokens=5) == "ok"
    assert sleeps == [1.0, 2.0]

    def auth(**kw):
        raise litellm_mod.AuthenticationError("bad key", "openai", "gpt-4.1")

    monkeypatch.setattr(litellm_mod, "completion", auth)
    sleeps.clear()
    with pytest.raises(litellm_mod.AuthenticationError):
        judge.complete(MSGS, temperature=0.0, max_tokens=5)
    assert sleeps == []

    def always_limited(**kw):
        raise litellm_mod.RateLimitError("slow down", "openai", "gpt-4.1")

    monkeypatch.setattr(litellm_mod, "completion", always_limited)
    with pytest.raises(litellm_mod.RateLimitError):
        judge.complete(MSGS, temperature=0.0, max_tokens=5)
    assert sleeps == [1.0, 2.0]


def test_record_to_writes_a_file_that_replays(litellm_mod, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setattr(
        litellm_mod, "completion", lambda **kw: _reply("verdict " + kw["messages"][-1]["content"])
    )
    out = tmp_path / "recorded_live.json"
    monkeypatch.setenv("PTB_JUDGE_RECORD_TO", str(out))
    judge = make_judge("gpt-4.1")
    assert isinstance(judge, RecordingJudge)
    other = [{"role": "user", "content": "second"}]
    assert judge.complete(MSGS, temperature=0.0, max_tokens=5) == "verdict A or B?"
    assert judge.complete(other, temperature=0.0, max_tokens=5) == "verdict second"
    replay = RecordedJudge(out, "gpt-4.1")
    assert replay.complete(other, temperature=0.0, max_tokens=5) == "verdict second"
    assert replay.complete(MSGS, temperature=0.0, max_tokens=5) == "verdict A or B?"


def test_concurrency_setting(monkeypatch):
    assert judge_concurrency() == llm_judge.DEFAULT_CONCURRENCY
    monkeypatch.setenv("PTB_JUDGE_CONCURRENCY", "3")
    assert judge_concurrency() == 3
    monkeypatch.setenv("PTB_JUDGE_CONCURRENCY", "0")
    assert judge_concurrency() == 1
    monkeypatch.setenv("PTB_JUDGE_CONCURRENCY", "many")
    with pytest.raises(JudgeConfigError, match="PTB_JUDGE_CONCURRENCY"):
        judge_concurrency()


def test_parallel_map_keeps_order_and_captures_failures(monkeypatch):
    monkeypatch.setenv("PTB_JUDGE_CONCURRENCY", "4")

    def f(x: int) -> int:
        if x == 3:
            raise ValueError("three")
        return x * 10

    out = parallel_map(f, list(range(6)))
    assert out[:3] == [0, 10, 20] and out[4:] == [40, 50] and isinstance(out[3], ValueError)
    raise_systemic(out)  # one failure among successes stays per-item
    with pytest.raises(ValueError, match="three"):
        raise_systemic([out[3], ValueError("other")])
    with pytest.raises(MissingRecordingError):
        raise_systemic([1, MissingRecordingError("no recording"), 2])
    assert parallel_map(f, []) == []


def test_strip_thinking():
    assert strip_thinking("<think>hmm\nlong</think>\n\nThe answer.") == "The answer."
    assert strip_thinking("Plain answer.  ") == "Plain answer."
    assert strip_thinking("<think>never finished") == ""
    assert (
        strip_thinking("<think>a</think>Part one <think>b</think>part two") == "Part one part two"
    )


@pytest.mark.parametrize("benchmark_id", ["arenahardwriting", "healthbench"])
def test_judged_benchmarks_fail_once_without_a_key(litellm_mod, monkeypatch, benchmark_id):
    from posttrainbench.task.benchmarks import get_benchmark
    from posttrainbench.task.benchmarks.base import Sample

    calls = []
    monkeypatch.setattr(litellm_mod, "completion", lambda **kw: calls.append(kw))
    bench = get_benchmark(benchmark_id)
    sample = Sample(
        id="q1",
        category="c",
        data={
            "prompt": "Write a haiku"
            if benchmark_id == "arenahardwriting"
            else [{"role": "user", "content": "hi"}],
            "baseline_answer": "An old pond.",
            "rubrics": [{"criterion": "Is kind.", "points": 5, "tags": []}],
        },
    )
    with pytest.raises(
        JudgeConfigError,
        match=rf"^judge model {re.escape(bench.default_judge_model)} needs OPENAI_API_KEY "
        r"\(set it, or PTB_JUDGE_MODEL",
    ):
        bench.score_batch([sample, sample], ["an answer", "another answer"])
    assert calls == []


def test_without_litellm_the_error_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    with pytest.raises(JudgeConfigError, match="need litellm .*requirements-judge.txt"):
        make_judge("gpt-4.1")
