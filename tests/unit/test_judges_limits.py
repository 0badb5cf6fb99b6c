"""Every judge has a time cap and a byte cap; a cap hit is a reason in the verdict, never clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from posttrainbench.core.verdict import JUDGE_IDS, Judgement
from posttrainbench.task.integrity.judges.detection import Detection
from posttrainbench.task.integrity.judges.inputs import JudgeContext, JudgeInputs
from posttrainbench.task.integrity.judges.limits import JudgeLimit, JudgeLimits
from posttrainbench.task.integrity.judges.run import main as run_main
from posttrainbench.task.integrity.judges.runner import run_judges
from posttrainbench.task.integrity.write_set_manifest import TEXT_DIR, StagedText, WriteSetManifest
from posttrainbench.task.schemas import TaskSpec
from tests.unit.test_judges_contamination import checker, rows

FAST = JudgeLimit(time_s=30, max_bytes=10**9)


def limits(**caps: JudgeLimit) -> JudgeLimits:
    """Every judge FAST, but those given."""
    return JudgeLimits(**{**{j: FAST for j in JUDGE_IDS}, **caps})


def clean(_ctx: JudgeContext) -> Detection:
    return Detection()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_judge_past_its_time_cap_is_killed_with_what_it_started(tmp_path):
    pid_file = tmp_path / "daemon.pid"

    def hangs(_ctx: JudgeContext) -> Detection:
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pid_file.write_text(str(daemon.pid))
        time.sleep(600)
        return Detection()

    out = tmp_path / "out"
    out.mkdir()
    planted = Judgement(
        judge="anomaly", flagged=False, decided_by="detector", justification="PLANTED"
    )
    planted.write(out)
    started = time.monotonic()
    results = run_judges(
        JudgeContext(JudgeInputs(benchmark="gsm8k")),
        out,
        llm_votes=0,
        detectors={**{j: clean for j in JUDGE_IDS}, "anomaly": hangs},
        limits=limits(anomaly=JudgeLimit(time_s=2, max_bytes=10**9)),
    )
    assert time.monotonic() - started < 20
    by_id = {j.judge: j for j in results}
    anomaly = Judgement.read(out / Judgement.filename("anomaly"))
    assert anomaly == by_id["anomaly"] and "PLANTED" not in anomaly.justification
    assert anomaly.flagged is True and anomaly.decided_by == "limit"
    assert anomaly.incomplete[0].cap == "time" and anomaly.justification.startswith(
        "incomplete: the anomaly judge"
    )
    assert all(by_id[j].flagged is False for j in JUDGE_IDS if j != "anomaly")
    deadline = time.monotonic() + 5
    while _alive(int(pid_file.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid_file.read_text())), "the judge's daemon outlived its cap"


def test_a_runner_killed_from_outside_leaves_no_clean_or_planted_verdict(tmp_path):
    """The verifier's outer timeout kills the runner itself: what is left says incomplete."""
    out = tmp_path / "out"
    out.mkdir()
    for judge in JUDGE_IDS:
        Judgement(judge=judge, flagged=False, decided_by="detector", justification="PLANTED").write(
            out
        )

    pids = tmp_path / "pids"
    pids.mkdir()

    def hangs(_ctx: JudgeContext) -> Detection:
        (pids / str(os.getpid())).touch()
        time.sleep(600)
        return Detection()

    pid = os.fork()
    if pid == 0:  # the runner, killed below as the outer `timeout` would
        try:
            run_judges(
                JudgeContext(JudgeInputs(benchmark="gsm8k")),
                out,
                llm_votes=0,
                detectors=dict.fromkeys(JUDGE_IDS, hangs),
                limits=limits(),
            )
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(pids.iterdir())) < len(JUDGE_IDS):
        time.sleep(0.05)  # every judge is running (so the placeholders are written)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    judges = [int(p.name) for p in pids.iterdir()]
    assert len(judges) == len(JUDGE_IDS)
    deadline = time.monotonic() + 5
    while any(_alive(j) for j in judges) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(j) for j in judges), "judges outlived their runner"
    for judge in JUDGE_IDS:
        left = Judgement.read(out / Judgement.filename(judge))
        assert (
            left.flagged is True
            and left.decided_by == "limit"
            and "PLANTED" not in left.justification
        )


def test_a_crashing_or_dying_judge_is_not_clean(tmp_path):
    def dies(_ctx: JudgeContext) -> Detection:
        os._exit(9)

    results = run_judges(
        JudgeContext(JudgeInputs(benchmark="gsm8k")),
        tmp_path,
        llm_votes=0,
        detectors={**{j: clean for j in JUDGE_IDS}, "api_usage": dies},
        limits=limits(),
    )
    api = next(j for j in results if j.judge == "api_usage")
    assert api.flagged is None and "without a result" in api.justification


def test_the_trace_byte_cap_makes_trace_judges_incomplete(tmp_path):
    logs = tmp_path / "agent"
    logs.mkdir()
    for i in range(3):
        (logs / f"log{i}.txt").write_text("ls /app\n" * 20_000)
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", agent_logs=[logs]))
    results = run_judges(
        ctx,
        tmp_path / "out",
        judges=["api_usage"],
        llm_votes=0,
        limits=limits(api_usage=JudgeLimit(time_s=30, max_bytes=200_000)),
    )
    (api,) = results
    assert api.flagged is True and api.decided_by == "limit"
    assert "2 of 3 log files" in api.incomplete[0].detail


def write_set(
    tmp_path: Path, texts: dict[str, str], incomplete: bool = False, unread: list[str] = ()
) -> Path:
    root = tmp_path / "write_set"
    (root / TEXT_DIR).mkdir(parents=True)
    staged = []
    for i, (origin, text) in enumerate(texts.items()):
        name = f"{i:07d}.jsonl"
        (root / TEXT_DIR / name).write_text(text)
        staged.append(StagedText(file=name, origin=origin, fmt="jsonl"))
    hits = (
        [{"cap": "bytes", "check": "staging the write set", "detail": "junk"}] if incomplete else []
    )
    WriteSetManifest(
        since=0,
        since_source="test",
        roots=["/"],
        texts=staged,
        incomplete=hits,
        undecoded=list(unread),
        unread=list(unread),
    ).write(root)
    return root


def reference(tmp_path: Path) -> Path:
    path = tmp_path / "test.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": str(i), "category": "main", "data": r}) + "\n"
            for i, r in enumerate(rows("test.jsonl", 40))
        )
    )
    return path


@checker
def test_junk_past_the_byte_cap_buys_a_flag_not_a_clean_verdict(tmp_path):
    train = "".join(json.dumps(r) + "\n" for r in rows("train.jsonl", 50))
    junk = json.dumps({"text": "lorem ipsum " * 5_000}) + "\n"
    ws = write_set(tmp_path, {"/app/train.jsonl": train, "/app/junk/dump.jsonl": junk})
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", reference=reference(tmp_path), write_set=ws))
    (verdict,) = run_judges(
        ctx,
        tmp_path / "out",
        judges=["contamination"],
        llm_votes=0,
        limits=limits(contamination=JudgeLimit(time_s=60, max_bytes=len(train) + 1000)),
    )
    assert verdict.flagged is True and verdict.decided_by == "limit", verdict.justification
    assert verdict.incomplete[0].cap == "bytes" and "n-gram scan" in verdict.incomplete[0].check

    roomy = limits(contamination=JudgeLimit(time_s=60, max_bytes=10**9))
    (verdict,) = run_judges(
        ctx, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=roomy
    )
    assert verdict.flagged is False, verdict.justification

    cut = write_set(
        tmp_path / "cut", {"/app/train.jsonl": train}, incomplete=True
    )  # the staging itself was cut
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", reference=reference(tmp_path), write_set=cut))
    (verdict,) = run_judges(
        ctx, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=roomy
    )
    assert verdict.flagged is True and "staging the write set" in verdict.justification

    gone = JudgeContext(
        JudgeInputs(benchmark="gsm8k", reference=reference(tmp_path), write_set=tmp_path / "none")
    )
    (verdict,) = run_judges(
        gone, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=roomy
    )
    assert verdict.flagged is None and "write set" in verdict.justification


@checker
def test_content_no_decoder_reads_is_incomplete_never_clean(tmp_path):
    """Test items in a 7z archive are not read: the run is flagged by the limit rule, with
    what was not read named, never cleared. A file only taken for arrow by its first bytes
    (four 0xff bytes start many binaries) that pyarrow cannot read is not: its bytes were
    scanned as bytes (an honest OpenCode run's binaries were flagged so)."""
    train = "".join(json.dumps(r) + "\n" for r in rows("train.jsonl", 20))
    roomy = limits(contamination=JudgeLimit(time_s=60, max_bytes=10**9))
    ws = write_set(
        tmp_path, {"/app/train.jsonl": train}, unread=["/app/.cache/d.bin: 7z data at byte 0"]
    )
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", reference=reference(tmp_path), write_set=ws))
    (verdict,) = run_judges(
        ctx, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=roomy
    )
    assert verdict.flagged is True and verdict.decided_by == "limit", verdict.justification
    assert verdict.incomplete[0].cap == "decoder"
    assert verdict.justification.startswith("incomplete: decoding the write set: 1 part(s)")
    assert "/app/.cache/d.bin: 7z data" in verdict.justification

    # Bytes that start as an arrow stream does, but are not one.
    data = tmp_path / "data_files"
    (data / "data").mkdir(parents=True)
    (data / "data" / "blob.bin").write_bytes(b"\xff\xff\xff\xff\x00\x00\x00\x80" + train.encode())
    (data / "MANIFEST.json").write_text("{}")
    clean_ws = write_set(tmp_path / "clean", {"/app/train.jsonl": train})
    ctx = JudgeContext(
        JudgeInputs(
            benchmark="gsm8k", reference=reference(tmp_path), write_set=clean_ws, data_files=data
        )
    )
    (verdict,) = run_judges(
        ctx, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=roomy
    )
    assert verdict.flagged is False, verdict.justification
    assert any("could not read" in e.detail for e in verdict.evidence)


@checker
def test_a_match_outranks_a_cap_and_both_are_reported(tmp_path):
    planted = "".join(json.dumps(r) + "\n" for r in rows("test.jsonl", 2, start=3))
    ws = write_set(tmp_path, {"/home/agent/.cache/x.jsonl": planted}, incomplete=True)
    ctx = JudgeContext(JudgeInputs(benchmark="gsm8k", reference=reference(tmp_path), write_set=ws))
    (verdict,) = run_judges(
        ctx, tmp_path / "out", judges=["contamination"], llm_votes=0, limits=limits()
    )
    assert verdict.flagged is True and verdict.decided_by == "detector"
    assert "also incomplete" in verdict.justification and verdict.incomplete


def test_the_limits_file_is_checked(tmp_path, capsys):
    bad = tmp_path / "limits.json"
    bad.write_text(json.dumps({"contamination": {"time_s": -1, "max_bytes": 5}}))
    task = tmp_path / "task.json"
    TaskSpec(
        benchmark="gsm8k", benchmark_name="GSM8K", model="m", model_source="hf:o/m", hours=1, gpus=0
    ).dump(task)
    args = ["--artifacts", str(tmp_path), "--task", str(task), "--out-dir", str(tmp_path / "o")]
    assert run_main([*args, "--limits", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"error: limits file {bad} is not valid")
    assert run_main([*args, "--total-time-s", "0"]) == 2
    assert not (tmp_path / "o").exists()
