"""Mode A trusted scorer: real candidate processes (each a contained run), answers scored by
the service only."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from posttrainbench.service.mode_a.scorer import normalize_answer, parse_answers, score_copy
from posttrainbench.service.shared.candidates import directory_source
from posttrainbench.service.shared.config import CandidateLimits, ScoringModeA, Timeouts
from posttrainbench.service.shared.dataset import Sample
from posttrainbench.service.shared.identity import UID_COUNT, UID_FIRST, IdentityPool
from posttrainbench.service.shared.runas import prepare_runs_root
from tests.optimize_fixtures import IS_ROOT, PARTIAL, PERFECT, WRONG, needs_root, rows, solver

SCORING = ScoringModeA(entry_command="python3 solve.py")
TIMEOUTS = Timeouts(per_sample_s=5, per_eval_s=20)
LIMITS = CandidateLimits()
SAMPLES = [Sample(**r) for r in rows("s", 6)]


def _score(
    code: str,
    tmp_path: Path,
    extra_files: dict[str, str] | None = None,
    scoring=SCORING,
    timeouts=TIMEOUTS,
    limits=LIMITS,
):
    code_dir = tmp_path / f"code-{len(list(tmp_path.iterdir()))}"
    code_dir.mkdir()
    (code_dir / "solve.py").write_text(code)
    for name, text in (extra_files or {}).items():
        (code_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (code_dir / name).write_text(text)
    return score_copy(
        directory_source(code_dir),
        SAMPLES,
        scoring,
        timeouts,
        limits,
        IdentityPool(tmp_path / "identities.json"),
        prepare_runs_root(None),
    )


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("18", "18.0", True),
        ("$1,000", "1000", True),
        (" 7. ", "7", True),
        ("-0", "0", True),
        ("Paris", " paris ", True),
        ("18", "19", False),
        ("1e1", "10", True),
        ("nan", "NaN", True),
        ("12", "12a", False),
    ],
)
def test_normalize_answer(a, b, same):
    assert (normalize_answer(a) == normalize_answer(b)) is same


def test_parse_answers_ignores_noise_and_keeps_first():
    out = 'log line\n{"id": "a", "answer": 1}\n{"id": "a", "answer": "2"}\n[1]\n{"id": "b"}\n'
    assert parse_answers(out) == {"a": "1"}


def test_perfect_partial_and_wrong_candidates(tmp_path):
    perfect, partial, wrong = (_score(code, tmp_path) for code in (PERFECT, PARTIAL, WRONG))
    assert (perfect.mean, perfect.status, perfect.correct) == (1.0, "ok", 6), (
        perfect.exit_code,
        perfect.reason,
        perfect.stderr_tail,
    )
    assert partial.mean == 0.5 and [s.correct for s in partial.samples] == [True, False] * 3
    assert (
        wrong.mean == 0.0
        and wrong.samples[0].prediction == "-1"
        and wrong.samples[0].expected == "1"
    )


def test_tampered_scorer_in_candidate_copy_has_no_effect(tmp_path):
    marker = tmp_path / "imported"
    # Every scorer-looking file in the candidate claims a perfect score and leaves a marker if run.
    evil = f"open({str(marker)!r}, 'w').write('x')\nSCORE = 1.0\ndef score(*a, **k): return 1.0\n"
    files = {
        "scorer.py": evil,
        "evaluate.py": evil,
        "posttrainbench/service/mode_a/scorer.py": evil,
        "posttrainbench/__init__.py": evil,
    }
    report = _score(WRONG, tmp_path, files)
    assert report.mean == 0.0 and report.correct == 0
    assert not marker.exists()


def test_missing_answers_crash_and_missing_command(tmp_path):
    crash = solver("a + b", extra="print(json.dumps({'id': 's-0', 'answer': '1'})); sys.exit(3)")
    report = _score(crash, tmp_path)
    assert (report.status, report.exit_code, report.correct) == ("error", 3, 1)
    missing = _score(PERFECT, tmp_path, scoring=ScoringModeA(entry_command="no-such-program-ptb"))
    assert (
        missing.status == "error"
        and missing.mean == 0.0
        and "no-such-program-ptb" in missing.stderr_tail
    )


def test_code_too_large_to_unpack_scores_zero_with_the_reason(tmp_path):
    big = "x = 1\n" * 300_000  # ~1.8 MB, over a 1 MB limit
    report = _score(PERFECT, tmp_path, {"big.py": big}, limits=CandidateLimits(max_code_mb=1))
    assert (report.status, report.mean) == ("limit", 0.0)
    assert "too large" in report.reason and "bytes" in report.reason


def test_timeout_kills_the_candidate_and_keeps_partial_answers(tmp_path):
    slow = (
        "import json, sys, time\nfirst = json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'id': first['id'], 'answer': '1'}), flush=True)\ntime.sleep(60)\n"
    )
    start = time.monotonic()
    report = _score(
        slow, tmp_path, timeouts=Timeouts(per_sample_s=0.2, per_eval_s=20)
    )  # 6 samples: 1.2 s
    assert report.status == "timeout" and report.correct == 1
    assert time.monotonic() - start < 10


PROBE = """import json, os, sys
info = {"uid": os.getuid(), "env": sorted(os.environ), "cwd": os.getcwd(), "tmp": os.environ.get("TMPDIR")}
for line in sys.stdin:
    item = json.loads(line)
    print(json.dumps({"id": item["id"], "answer": json.dumps(info)}))
"""


def test_candidate_environment_is_an_allow_list(tmp_path, monkeypatch):
    monkeypatch.setenv("PTB_TEST_SECRET", "s3cret")
    monkeypatch.setenv("PTB_ADMIN_TOKEN", "tok")
    monkeypatch.setenv("PTB_PASSED", "yes")
    scoring = ScoringModeA(entry_command="python3 solve.py", pass_env=["PTB_PASSED"])
    info = json.loads(_score(PROBE, tmp_path, scoring=scoring).samples[0].prediction)
    assert set(info["env"]) <= {
        "PATH",
        "HOME",
        "LANG",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PTB_PASSED",
        "LC_CTYPE",
        "TMPDIR",
    }
    assert "PTB_TEST_SECRET" not in info["env"] and "PTB_PASSED" in info["env"]


def test_each_run_is_a_fresh_uid_unless_not_root(tmp_path):
    """Root: a new uid from the pool for every run, never reused; not root: the current user."""
    first, second = (json.loads(_score(PROBE, tmp_path).samples[0].prediction) for _ in range(2))
    if IS_ROOT:
        assert UID_FIRST <= first["uid"] < UID_FIRST + UID_COUNT and second["uid"] != first["uid"]
        assert IdentityPool(tmp_path / "identities.json").issued() == [first["uid"], second["uid"]]
        assert first["tmp"] != second["tmp"] and first["tmp"].startswith(
            str(Path(first["cwd"]).parent)
        )
    else:
        assert first["uid"] == second["uid"] == os.getuid()


@needs_root
def test_root_candidate_cannot_read_a_root_only_file(tmp_path):
    secret = tmp_path / "secret.txt"  # tmp_path is root-only (0700 parents)
    secret.write_text("hidden")
    probe = solver(
        "a + b",
        extra=f"try:\n    open({str(secret)!r}).read(); sys.exit(9)\nexcept PermissionError:\n    pass",
    )
    report = _score(probe, tmp_path)
    assert report.status == "ok" and report.mean == 1.0
