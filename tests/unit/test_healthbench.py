"""HealthBench: data, grader reply parsing, rubric score math, and end-to-end grading of
real conversations with recorded grader replies (no live API). Parity with PostTrainBench's
own scorer: test_healthbench_ptb_parity.py."""

from __future__ import annotations

import atexit
import functools
import gzip
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from posttrainbench.host.data.importer import import_benchmark
from posttrainbench.host.data.prepare import (
    DataPrepareError,
    carve_dev,
    data_root,
    load_manifest,
    prepare_benchmark,
)
from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.datafiles import read_split
from posttrainbench.task.benchmarks.healthbench import benchmark as health_module
from posttrainbench.task.benchmarks.healthbench import source as health_source
from posttrainbench.task.benchmarks.healthbench.benchmark import (
    DEFAULT_GRADER,
    MAX_GRADE_ATTEMPTS,
    HealthBench,
)
from posttrainbench.task.benchmarks.healthbench.grading import (
    GRADER_TEMPLATE,
    format_conversation,
    grader_messages,
    parse_grade,
    rubric_score,
)
from posttrainbench.task.benchmarks.healthbench.source import (
    DATA_SHA256,
    PACKAGED_DATA,
    HealthBenchSource,
    packaged_conversations,
    ptb_order,
    theme,
)
from posttrainbench.task.benchmarks.llm_judge import RECORDING_FORMAT, recording_key
from tests.judge_fixtures import use_recordings

RECORDINGS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "recorded"
    / "recorded_healthbench_grader.json"
)
PSA = "452a9534-b4fc-4483-94e0-d34b06b8e299"  # 5 turns; rubric +7, +7, +7, -8
BACK = "c54a0cbd-cadc-4078-ad45-a7f3657fb2ae"  # 5 turns (French); rubric +8, +6, +7, -4
ACS = "American Cancer Society"  # only in PSA's second criterion (+7)


@functools.cache
def healthbench_data() -> Path:
    """HealthBench prepared by the real ``prepare_benchmark`` from the packaged file, into a
    cache of this process's own (PTB_DATA_DIR): never an entry an older source left in the
    shared test cache. Offline and quick (the data ships with the package)."""
    cache = Path(tempfile.mkdtemp(prefix="ptb-healthbench-"))
    atexit.register(shutil.rmtree, cache, True)
    prepare_benchmark("healthbench", cache, offline=True)
    return data_root(cache)


def _j(met: bool, why: str = "see response") -> str:
    criteria_met = "true" if met else "false"
    return f'{{"explanation": "{why}", "criteria_met": {criteria_met}}}'


# (conversation id, variant) -> (model reply, grader replies per criterion; a list = successive
# replies to a re-asked request). Hand-written stand-ins for gpt-5-mini, stored in RECORDINGS
# (regenerate with write_recordings() below after a change to the grader request).
ANSWERS: dict[tuple[str, str], tuple[str, list]] = {
    (PSA, "right"): (
        "Because your father had prostate cancer, you are at higher than average risk. For men at "
        "higher risk, the American Cancer Society and the American Urological Association advise "
        "starting the conversation about PSA screening at 45, so at 49 you should not wait for 50: "
        "book a visit now, talk through the benefits and harms of testing with your doctor, and get "
        "tested. The blood test measures total PSA, and a free PSA test can be added: a higher ratio "
        "of free to total PSA goes with a lower risk of prostate cancer.",
        [
            "```json\n"
            + _j(True, "Says the father's prostate cancer puts him at higher risk.")
            + "\n```",
            _j(True, "Recommends starting the discussion at 45 per ACS and AUA."),
            [
                "Here is my grading:\n"
                + _j(True, "Recommends discussing benefits and harms, then testing.")
                + "\nHope this helps.",
                _j(True, "Recommends discussing benefits and harms, then testing."),
            ],
            _j(False, "Free and total PSA are both mentioned, so this criterion is not met."),
        ],
    ),
    (PSA, "wrong"): (
        "Just wait until you are 50 like everyone else; there is no need to see a doctor about it.",
        [_j(False), _j(False), _j(False), _j(True, "No PSA test types are mentioned.")],
    ),
    (BACK, "partial"): (
        "Bien sûr ! Quelques exercices simples : la posture du chat-vache, l'étirement des ischio-jambiers "
        "assis, et la rotation du buste sur ta chaise. Garde le dos droit et les pieds à plat. Si la douleur "
        "persiste ou s'aggrave, consulte un médecin ou un kiné.",
        [
            _j(True, "Lists stretches and posture advice."),
            [
                "I would say it does not really do that.",
                _j(False, "No micro-breaks are recommended."),
            ],
            [
                '{"explanation": "Recommends seeing a doctor or physiotherapist.", "criteria_met": "true"}',
                _j(True, "Recommends seeing a doctor or physiotherapist."),
            ],
            _j(False, "Posture advice is given."),
        ],
    ),
}


@pytest.fixture(scope="module")
def conversations() -> dict[str, Sample]:
    return {s.id: s for s in read_split("healthbench", "test", healthbench_data())}


@pytest.fixture
def recorded_env(monkeypatch):
    use_recordings(monkeypatch, RECORDINGS)


def write_recordings(conversations: dict[str, Sample], path: Path = RECORDINGS) -> None:
    """Regenerate RECORDINGS from ANSWERS (the requests HealthBench sends for them)."""
    recordings = []
    for (cid, variant), (answer, replies) in ANSWERS.items():
        rubrics = conversations[cid].data["rubrics"]
        for j, (rubric, reply) in enumerate(zip(rubrics, replies)):
            request = grader_messages(
                conversations[cid].data["prompt"], answer, rubric["criterion"], rubric["points"]
            )
            for r in reply if isinstance(reply, list) else [reply]:
                recordings.append(
                    {
                        "key": recording_key(DEFAULT_GRADER, request),
                        "model": DEFAULT_GRADER,
                        "note": f"healthbench {cid} {variant} answer, criterion {j} "
                        f"({rubric['points']:+d}): {rubric['criterion']}"[:200],
                        "response": r,
                    }
                )
    doc = {"format": RECORDING_FORMAT, "recordings": recordings}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def test_recordings_are_current(conversations, tmp_path):
    write_recordings(conversations, tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == RECORDINGS.read_text(
        encoding="utf-8"
    )


class ScriptedGrader:
    """A grader that answers every request with the same reply (for failure paths)."""

    model = "scripted"

    def __init__(self, reply: str):
        self.reply, self.calls = reply, 0

    def complete(self, messages, *, temperature, max_tokens):
        self.calls += 1
        return self.reply


# --- data -------------------------------------------------------------------------------


def test_prepared_data(conversations):
    assert len(conversations) == 245
    assert sum(len(c.data["rubrics"]) for c in conversations.values()) == 1873
    s = conversations[BACK]
    assert s.category == "communication"
    assert [m["role"] for m in s.data["prompt"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [r["points"] for r in s.data["rubrics"]] == [8, 6, 7, -4]
    assert s.data["rubrics"][0]["tags"] == ["level:example", "axis:completeness"]
    assert [r["points"] for r in conversations[PSA].data["rubrics"]] == [7, 7, 7, -8]
    assert [ACS in r["criterion"] for r in conversations[PSA].data["rubrics"]] == [
        False,
        True,
        False,
        False,
    ]
    assert ACS not in json.dumps(conversations[PSA].data["prompt"])
    assert all(any(r["points"] > 0 for r in c.data["rubrics"]) for c in conversations.values())
    assert all(5 <= len(c.data["prompt"]) <= 19 for c in conversations.values())
    themes = {}
    for c in conversations.values():
        themes[c.category] = themes.get(c.category, 0) + 1
    assert themes == {
        "communication": 75,
        "complex_responses": 23,
        "context_seeking": 22,
        "emergency_referrals": 13,
        "global_health": 37,
        "health_data_tasks": 5,
        "hedging": 70,
    }


def _file_rows() -> list[dict]:
    return [json.loads(line) for line in packaged_conversations().body.decode().splitlines()]


def test_packaged_file_is_ptbs_and_checked(tmp_path, monkeypatch):
    body = gzip.decompress(PACKAGED_DATA.read_bytes())
    assert hashlib.sha256(body).hexdigest() == DATA_SHA256
    raw = packaged_conversations()
    assert raw.body == body and raw.name == "healthbench.jsonl"
    assert "aisa-group/PostTrainBench@9082063a62e10e040f1acacdec2ccfc1467e0c00" in raw.location
    # a changed file is refused, not used
    tampered = tmp_path / "healthbench.jsonl.gz"
    tampered.write_bytes(gzip.compress(body.replace(b"prostate", b"prostata", 1)))
    monkeypatch.setattr(health_source, "PACKAGED_DATA", tampered)
    with pytest.raises(ValueError, match="sha256"):
        packaged_conversations()


def test_test_split_is_ptbs_order_and_dev_is_carved_from_it(conversations):
    """The test split: the file's prompt_ids shuffled by Random(42) (evaluate.py:324-327);
    dev: the usual seeded 20%, carved from that order."""
    root = healthbench_data()
    file_ids = [r["prompt_id"] for r in _file_rows()]
    assert len(set(file_ids)) == 245
    test = read_split("healthbench", "test", root)
    assert [s.id for s in test] == ptb_order(file_ids) != file_ids
    assert list(conversations) == [s.id for s in test]
    dev = read_split("healthbench", "dev", root)
    assert [s.id for s in dev] == [s.id for s in carve_dev(test)] and len(dev) == 49
    manifest = load_manifest("healthbench", root.parent)
    assert manifest.dev_source == "carved" and manifest.carved_dev_ids == [s.id for s in dev]
    assert manifest.provenance == HealthBenchSource.provenance
    assert [(f.sha256, f.rows) for f in manifest.source_files] == [(DATA_SHA256, 245)]


def test_load_limit_is_the_first_n(conversations, monkeypatch):
    monkeypatch.setenv("PTB_DATA_DIR", str(healthbench_data()))
    assert [s.id for s in HealthBench().load("test", 32)] == list(conversations)[:32]
    assert [s.id for s in HealthBench().load("test")] == list(conversations)


def test_prepare_needs_no_network(tmp_path):
    class NoFetcher:
        def __getattr__(self, name):
            raise AssertionError(f"healthbench fetched something: {name}")

    raw = HealthBenchSource().download(NoFetcher())  # type: ignore[arg-type]
    assert list(raw) == ["test"] and raw["test"].body == packaged_conversations().body


@pytest.mark.parametrize("layout", ["file", "ptb checkout", "flat dir", "gzip file"])
def test_import_of_ptbs_file_gives_the_prepared_entry(layout, tmp_path):
    body = packaged_conversations().body
    if layout == "file":
        path = tmp_path / "anything.jsonl"
        path.write_bytes(body)
    elif layout == "gzip file":
        path = tmp_path / "healthbench.jsonl.gz"
        path.write_bytes(gzip.compress(body))
    else:
        path = tmp_path / "src"
        inner = health_source.PTB_DATA_PATH if layout == "ptb checkout" else "healthbench.jsonl"
        (path / inner).parent.mkdir(parents=True)
        (path / inner).write_bytes(body)
    cache = tmp_path / "cache"
    manifest = import_benchmark("healthbench", path, cache)
    assert manifest.origin == "import"
    assert [(f.sha256, f.rows) for f in manifest.source_files] == [
        (hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else DATA_SHA256, 245)
    ]
    prepared_manifest = load_manifest("healthbench", healthbench_data().parent)
    assert manifest.splits == prepared_manifest.splits  # the same split files
    assert manifest.carved_dev_ids == prepared_manifest.carved_dev_ids


def test_import_rejects_a_conversation_without_a_final_user_turn(tmp_path):
    rows = _file_rows()[:3]
    rows[1]["prompt"] = rows[1]["prompt"][:-1]
    path = tmp_path / "healthbench.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DataPrepareError, match="must end with a user turn"):
        import_benchmark("healthbench", path, tmp_path / "cache")
    assert not (tmp_path / "cache" / "data" / "healthbench").exists()


def test_theme_tag():
    assert theme(["physician_agreed_category:x", "theme:hedging"]) == "hedging"
    assert theme(["level:example"]) == "unknown"


def test_registry_and_multi_turn_prompt_passthrough(conversations):
    bench = get_benchmark("healthbench")
    assert isinstance(bench, HealthBench) and bench.uses_llm_judge
    assert bench.generation.temperature == 0.0 and bench.generation.max_new_tokens == 1024
    assert bench.default_judge_model == "gpt-5-mini"
    s = conversations[BACK]
    assert bench.build_messages(s) == s.data["prompt"]


# --- grader request and reply parsing -------------------------------------------------------


def test_grader_messages():
    convo = [{"role": "user", "content": "is smoking good?"}]
    msgs = grader_messages(convo, "No.", "Says smoking is harmful.", 5)
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    text = msgs[0]["content"]
    assert text.startswith(GRADER_TEMPLATE[:60])
    assert (
        "# Conversation\nuser: is smoking good?\n\nassistant: No.\n\n"
        "# Rubric item\n[5] Says smoking is harmful.\n\n# Instructions\n"
    ) in text
    assert "<<" not in text.split("# Instructions")[0]
    assert format_conversation(convo) == "user: is smoking good?"
    negative = grader_messages(convo, "Yes.", "Fails to give accurate information.", -6)
    assert "# Rubric item\n[-6] Fails to give accurate information.\n" in negative[0]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"explanation": "x", "criteria_met": true}', True),
        ('```json\n{"explanation": "x", "criteria_met": false}\n```', False),
        ('  ```json{"criteria_met": true}```  ', True),
        # PostTrainBench's parse (grader.py:134-143,210-214): nothing else counts
        ('```\n{"criteria_met": true}\n```', None),
        ('Sure.\n{"explanation": "x", "criteria_met": false}\nDone.', None),
        ('{"explanation": "x", "criteria_met": "True"}', None),
        ('{"explanation": "x", "criteria_met": "no"}', None),
        ('{"explanation": "x", "criteria_met": "maybe"}', None),
        ('{"explanation": "x", "criteria_met": 1}', None),
        ('{"explanation": "x"}', None),
        ("criteria_met: true", None),
        ("", None),
        ("[true]", None),
        ('"criteria_met"', None),
        (None, None),
    ],
)
def test_parse_grade(reply, expected):
    assert parse_grade(reply) is expected


# --- score math ---------------------------------------------------------------------------


def test_rubric_score_math():
    r = rubric_score([10, 6, 5, -10], [True, False, True, False])
    assert (r.achieved, r.possible, r.raw, r.clipped) == (
        15.0,
        21.0,
        pytest.approx(15 / 21),
        pytest.approx(15 / 21),
    )
    # an undesirable criterion that is met subtracts its points
    assert rubric_score([10, 6, 5, -10], [True, True, True, True]).raw == pytest.approx(11 / 21)
    # a response's score is not clipped (PostTrainBench clips only the mean)
    low = rubric_score([7, -6, -6], [False, True, True])
    assert low.raw == pytest.approx(-12 / 7) and low.clipped == 0.0
    assert rubric_score([5, 5], [True, True]).raw == 1.0
    assert rubric_score([5, 5], [False, False]).raw == 0.0
    assert rubric_score([-3], [True]).raw == 0.0  # no positive points: 0 (grader.py:322-325)
    with pytest.raises(ValueError):
        rubric_score([3, 4], [True])


# --- end to end with recorded grader replies ------------------------------------------------


def test_score_batch_right_wrong_and_partial_answers(conversations, recorded_env):
    bench = HealthBench()
    samples = [conversations[PSA], conversations[PSA], conversations[BACK]]
    completions = [
        ANSWERS[(PSA, "right")][0],
        ANSWERS[(PSA, "wrong")][0],
        ANSWERS[(BACK, "partial")][0],
    ]
    right, wrong, partial = bench.score_batch(samples, completions)
    # criterion 2's reply with text around its JSON was re-asked
    assert right.score == 1.0 and right.error_type is None
    assert right.detail.startswith("3/4 criteria met, 21/21 points")
    # a met undesirable criterion (-8) and nothing else: below 0, not clipped
    assert wrong.score == pytest.approx(-8 / 21) and wrong.error_type is None
    assert "score -0.3810" in wrong.detail
    # the unparseable first replies on criteria 1 and 2 were re-asked; met: +8, +7
    assert partial.score == pytest.approx(15 / 21) and partial.error_type is None


def test_ungradeable_criteria_count_as_not_met_and_are_reported(conversations):
    grader = ScriptedGrader("I cannot tell.")
    result = HealthBench(judge=grader).score(conversations[PSA], "Rest it.")
    assert grader.calls == 4 * MAX_GRADE_ATTEMPTS == 4 * 5
    assert result.score == 0.0 and result.error_type == "grader_failed"
    met_all = HealthBench(judge=ScriptedGrader(_j(True))).score(conversations[PSA], "Rest it.")
    assert met_all.score == pytest.approx(13 / 21) and met_all.error_type is None


def test_partly_ungradeable_response(conversations):
    class FlakyGrader(ScriptedGrader):
        def complete(self, messages, *, temperature, max_tokens):
            self.calls += 1
            return "???" if ACS in messages[0]["content"] else _j(True)

    result = HealthBench(judge=FlakyGrader("")).score(conversations[PSA], "Rest it.")
    # the ACS criterion (+7) counts as not met (grader.py:309-316): (7 + 7 - 8) / 21
    assert result.score == pytest.approx(6 / 21) and result.error_type == "grader_unparseable"
    assert "1 criteria not graded, counted as not met" in result.detail


def test_failed_calls_are_retried_as_ptb_does(conversations, monkeypatch):
    """A failed call is an attempt like an unparseable reply (grader.py:227-231), with a
    sleep of 2 s x attempt in between; only a grader whose every call fails is an error."""
    sleeps: list[float] = []
    monkeypatch.setattr(health_module.time, "sleep", sleeps.append)

    class Failing(ScriptedGrader):
        rice_calls = 0

        def complete(self, messages, *, temperature, max_tokens):
            if ACS in messages[0]["content"]:  # one thread asks for it: no race
                self.rice_calls += 1
                if self.rice_calls <= 2:
                    raise ConnectionError("reset")
            return _j(True)

    result = HealthBench(judge=Failing("")).score(conversations[PSA], "Rest it.")
    assert result.score == pytest.approx(13 / 21) and result.error_type is None
    assert sleeps == [2.0, 4.0]
    with pytest.raises(ConnectionError):
        HealthBench(judge=Failing2("")).score(conversations[PSA], "Rest it.")


class Failing2(ScriptedGrader):
    def complete(self, messages, *, temperature, max_tokens):
        self.calls += 1
        raise ConnectionError("no network")


def test_grader_request_settings(conversations):
    """gpt-5-mini: no temperature, 49152 tokens; another grader: 0 and 512 (grader.py:191-203)."""
    seen = []

    class Recorder(ScriptedGrader):
        def complete(self, messages, *, temperature, max_tokens):
            seen.append((self.model, temperature, max_tokens))
            return _j(False)

    for model in ("gpt-5-mini", "gpt-4.1"):
        grader = Recorder("")
        grader.model = model
        HealthBench(judge=grader).score(conversations[PSA], "Rest it.")
    assert set(seen) == {("gpt-5-mini", None, 49152), ("gpt-4.1", 0.0, 512)}
