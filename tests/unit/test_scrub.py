"""The secret scrubber: known values, key shapes, clean negatives, JSON validity, trees,
streaming, atomicity, and the scrub of a run directory that `ptb run` performs."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from posttrainbench.host.credentials import scrub as scrub_module
from posttrainbench.host.credentials.scrub import Scrubber, secret_env_values

KNOWN = "canary-known-value-0123456789"
SHAPED = {
    "openai-key": "sk-proj-Ab3dEfGhIjKlMnOpQrStUvWxYz0123456789_-xyz",
    "anthropic-key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "google-api-key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "github-token": "ghp_0123456789abcdefghijABCDEFGHIJ0123456789",
    "huggingface-token": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "slack-token": "xoxb-1234567890-abcdefghij",
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n"
    "-----END OPENSSH PRIVATE KEY-----",
}
CLEAN = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "run bfcl-smollm2-135m-tests.canary_agent.CanaryAgent-20250101-120000",
    "task-bfcl-smollm2-135m-20250101-1234 and disk-usage-report-2025-01-01-final",
    "uuid 123e4567-e89b-12d3-a456-426614174000, max_tokens=4096, loss=0.1234",
    "The bearer of bad news asked for the AKIA docs; skip-connections are fine.",
    "def tokenize(text): return tokenizer(text)['input_ids']",
]


@pytest.fixture
def scrubber() -> Scrubber:
    return Scrubber({"MY_API_KEY": KNOWN, "SHORT_TOKEN": "abc123"})


def test_known_values_and_shapes_are_redacted(scrubber: Scrubber) -> None:
    assert scrubber.scrub_text(f"key={KNOWN};") == "key=[REDACTED:MY_API_KEY];"
    for name, value in SHAPED.items():
        assert scrubber.scrub_text(f"x {value} y") == f"x [REDACTED:{name}] y", name
    assert (
        scrubber.scrub_text("Authorization: Bearer abcdefghijklmnop1234")
        == "Authorization: [REDACTED:bearer-token]"
    )


def test_clean_text_is_left_alone(scrubber: Scrubber) -> None:
    for text in CLEAN:
        assert scrubber.scrub_text(text) == text
    # Values shorter than 8 bytes are not literal needles (they would hit everywhere).
    assert scrubber.scrub_text("abc123 abc123") == "abc123 abc123"


def test_secret_env_values_by_name() -> None:
    env = {
        "OPENAI_API_KEY": "a" * 20,
        "HF_TOKEN": "b" * 20,
        "DB_PASSWORD": "c" * 20,
        "MAX_TOKENS": "4096",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent",
        "PATH": "/usr/bin",
        "CODEX_AUTH_JSON_PATH": "/x/auth.json",
        "GITHUB_TOKEN": "",
    }
    assert set(secret_env_values(env)) == {"OPENAI_API_KEY", "HF_TOKEN", "DB_PASSWORD"}
    assert Scrubber.for_run(env, {"extra": KNOWN}).scrub_text(f"{'b' * 20} {KNOWN}") == (
        "[REDACTED:HF_TOKEN] [REDACTED:extra]"
    )


def test_json_stays_valid(tmp_path: Path) -> None:
    slashed = "tok/with/slashes-0123456789"
    scrubber = Scrubber({"A_TOKEN": KNOWN, "B_TOKEN": slashed, "C_TOKEN": 'quote"inside-012345'})
    document = {
        "env": {"A_TOKEN": KNOWN, KNOWN: [1, KNOWN]},
        "msg": f"said {SHAPED['openai-key']}",
        "q": 'quote"inside-012345',
        "path": slashed,
    }
    path = tmp_path / "config.json"
    # Harbor-style formatting, with escaped slashes as some JSON writers emit them.
    path.write_text(json.dumps(document, indent=4).replace("/", "\\/"))
    counts = scrubber.scrub_file(path)
    loaded = json.loads(path.read_text())
    assert loaded["env"] == {
        "A_TOKEN": "[REDACTED:A_TOKEN]",
        "[REDACTED:A_TOKEN]": [1, "[REDACTED:A_TOKEN]"],
    }
    assert loaded["msg"] == "said [REDACTED:openai-key]"
    assert loaded["q"] == "[REDACTED:C_TOKEN]" and loaded["path"] == "[REDACTED:B_TOKEN]"
    assert counts and sum(counts.values()) == 6


def test_json_fallback_when_a_literal_spans_syntax(tmp_path: Path) -> None:
    """A known value that matches across JSON syntax would break the file: strings are scrubbed instead."""
    scrubber = Scrubber({"ODD_SECRET": 'value-1234", "b'})
    path = tmp_path / "odd.json"
    path.write_text('{"a": "value-1234", "b": "x value-1234\\", \\"b y"}')
    scrubber.scrub_file(path)
    assert json.loads(path.read_text()) == {"a": "value-1234", "b": "x [REDACTED:ODD_SECRET] y"}


def _tree(root: Path) -> dict[str, bytes]:
    files = {
        "trial/agent/log.txt": f"start\nkey {KNOWN}\n".encode(),
        "trial/agent/trajectory.json": json.dumps({"m": f"{SHAPED['github-token']}"}).encode(),
        "trial/agent/clean.txt": b"nothing to see\n",
        "trial/artifacts/final_model/model.safetensors": KNOWN.encode() + b"\x00\x01",
        "trial/artifacts/blob.dat": b"\x00\x00" + KNOWN.encode(),
        "trial/verifier/latin1.txt": "café ".encode("latin-1") + KNOWN.encode(),
        "config.json": json.dumps({"env": {"X": KNOWN}}).encode(),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def test_tree_scrub(tmp_path: Path, scrubber: Scrubber) -> None:
    root = tmp_path / "run"
    files = _tree(root)
    (root / "trial/agent/log.txt").chmod(0o640)
    outside = tmp_path / "outside.txt"
    outside.write_text(KNOWN)
    (root / "link.txt").symlink_to(outside)
    report = scrubber.scrub_tree(root)
    assert (root / "trial/agent/log.txt").read_text() == "start\nkey [REDACTED:MY_API_KEY]\n"
    assert oct((root / "trial/agent/log.txt").stat().st_mode & 0o777) == oct(0o640)
    assert json.loads((root / "trial/agent/trajectory.json").read_text()) == {
        "m": "[REDACTED:github-token]"
    }
    assert (root / "trial/verifier/latin1.txt").read_bytes() == "café ".encode(
        "latin-1"
    ) + b"[REDACTED:MY_API_KEY]"
    # Binary and weight files are skipped, symlinks are not followed.
    for rel in (
        "trial/artifacts/final_model/model.safetensors",
        "trial/artifacts/blob.dat",
        "trial/agent/clean.txt",
    ):
        assert (root / rel).read_bytes() == files[rel]
    assert outside.read_text() == KNOWN
    assert (report.files_scanned, report.files_changed, report.files_skipped) == (5, 4, 3)
    assert report.by_name == {"MY_API_KEY": 3, "github-token": 1} and report.replacements == 4
    assert not list(root.rglob("*.scrub")) and not report.failures


def test_excluded_paths_are_untouched(tmp_path: Path, scrubber: Scrubber) -> None:
    root = tmp_path / "run"
    _tree(root)
    scrubber.scrub_tree(root, exclude=[root / "trial" / "agent", root / "config.json"])
    assert KNOWN in (root / "trial/agent/log.txt").read_text()
    assert KNOWN in (root / "config.json").read_text()
    assert KNOWN not in (root / "trial/verifier/latin1.txt").read_bytes().decode("latin-1")


@pytest.mark.parametrize("max_match", [scrub_module.MAX_PATTERN_BYTES, 300])
def test_streamed_scrub_matches_in_memory(tmp_path: Path, monkeypatch, max_match: int) -> None:
    """Large files are streamed in chunks; secrets across chunk edges are still found."""
    monkeypatch.setattr(scrub_module, "STREAM_THRESHOLD", 1024)
    monkeypatch.setattr(scrub_module, "CHUNK_BYTES", 4093)
    # A smaller bound on match length means a shorter overlap: many more chunk edges.
    monkeypatch.setattr(scrub_module, "MAX_PATTERN_BYTES", max_match)
    scrubber = Scrubber({"MY_API_KEY": KNOWN})
    rng = random.Random(7)
    needles = [KNOWN, *SHAPED.values(), "task-" + SHAPED["openai-key"][3:]]
    parts, picked = [], []
    for _ in range(400):
        parts.append("".join(rng.choice("abcdefgh \n-_") for _ in range(rng.randint(0, 900))))
        # Token characters right before a shape would make it part of a longer word.
        picked.append(rng.choice(needles))
        parts.append(" " + picked[-1] + " ")
    data = "".join(parts).encode()
    expected, counts = scrubber.scrub_bytes(data)
    path = tmp_path / "big.log"
    path.write_bytes(data)
    assert scrubber.scrub_file(path) == counts
    assert path.read_bytes() == expected
    negatives = sum(p.startswith("task-") for p in picked)
    assert KNOWN.encode() not in expected and sum(counts.values()) == 400 - negatives
    assert expected.count(b" task-proj-") == negatives > 0


def test_interrupted_tree_scrub_leaves_every_file_old_or_new(
    tmp_path: Path, scrubber: Scrubber, monkeypatch
) -> None:
    root = tmp_path / "run"
    for index in range(6):
        (root / f"d{index % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"d{index % 2}" / f"f{index}.log").write_text(f"line {index} {KNOWN}\n" * 200)
    old = {p: p.read_bytes() for p in root.rglob("*.log")}
    new = {p: scrubber.scrub_bytes(data)[0] for p, data in old.items()}
    real_replace = os.replace
    calls = {"n": 0}

    def failing_replace(src, dst, **dir_fds):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the walk
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(scrub_module.os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        scrubber.scrub_tree(root)
    states = [p.read_bytes() == new[p] for p in old]
    assert all(p.read_bytes() in (old[p], new[p]) for p in old)
    assert states.count(True) == 2 and not list(root.rglob("*.scrub"))


def test_unwritable_file_is_reported_and_the_rest_scrubbed(
    tmp_path: Path, scrubber: Scrubber, monkeypatch
) -> None:
    root = tmp_path / "run"
    root.mkdir()
    for name in ("a.log", "b.log", "c.log"):
        (root / name).write_text(KNOWN)
    real_replace = os.replace

    def replace(src, dst, **dir_fds):
        if str(dst).endswith("b.log"):
            raise PermissionError(13, "Permission denied")
        real_replace(src, dst, **dir_fds)

    monkeypatch.setattr(scrub_module.os, "replace", replace)
    report = scrubber.scrub_tree(root)
    assert len(report.failures) == 1 and "b.log" in report.failures[0]
    assert (root / "a.log").read_text() == (root / "c.log").read_text() == "[REDACTED:MY_API_KEY]"
    assert (root / "b.log").read_text() == KNOWN and not list(root.glob("*.scrub"))


def test_run_directory_is_scrubbed_when_the_job_is_interrupted(tmp_path: Path, monkeypatch) -> None:
    """`ptb run`'s job runner scrubs what the job wrote even when it is stopped by Ctrl-C."""
    import asyncio

    from posttrainbench.host.runner import job_runner
    from posttrainbench.host.runner.record import RunRecord

    monkeypatch.setenv("PTB_TEST_API_KEY", KNOWN)
    monkeypatch.setenv("PTB_SECRETS_DIR", str(tmp_path / "no-secrets-here"))
    (tmp_path / "no-secrets-here").mkdir()

    def fake_compile(benchmark, model, out_dir, options):
        task = out_dir / f"{benchmark}-{model}"
        task.mkdir(parents=True)
        (task / "task.toml").write_text(
            "# sealed task data may look like sk-proj-notreally0123456789abcdefgh\n"
        )
        return task

    class FakeJob:
        @staticmethod
        async def create(config):
            trial = config.jobs_dir / config.job_name / "trial-1" / "agent"
            trial.mkdir(parents=True)
            (trial / "log.txt").write_text(f"agent said {KNOWN}\n")
            raise KeyboardInterrupt

    monkeypatch.setattr(job_runner, "compile_task", fake_compile)
    monkeypatch.setattr(job_runner, "Job", FakeJob)
    request = job_runner.RunRequest(
        benchmark="bfcl",
        model="smollm2-135m",
        agent="nop",
        env="docker",
        runs_dir=tmp_path / "runs",
        run_id="r1",
    )
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(job_runner.execute(request))
    record = RunRecord.read(tmp_path / "runs" / "r1" / "run.json")
    assert record.status == "failed" and record.credentials and record.credentials.kind == "none"
    assert record.scrub is not None and record.scrub.by_name == {"PTB_TEST_API_KEY": 1}
    log = tmp_path / "runs" / "r1" / "jobs" / "r1" / "trial-1" / "agent" / "log.txt"
    assert log.read_text() == "agent said [REDACTED:PTB_TEST_API_KEY]\n"
    # The compiled task (input, sealed) is left byte-identical.
    assert (
        "sk-proj-notreally"
        in (tmp_path / "runs" / "r1" / "tasks" / "bfcl-smollm2-135m" / "task.toml").read_text()
    )


def test_harbor_error_quoting_a_secret_is_scrubbed(tmp_path: Path, monkeypatch) -> None:
    """An error Harbor raises is reported without the secret it quotes."""
    import asyncio

    from posttrainbench.core.errors import RunError
    from posttrainbench.host.runner import job_runner

    monkeypatch.setenv("PTB_TEST_API_KEY", KNOWN)
    monkeypatch.setenv("PTB_SECRETS_DIR", str(tmp_path))

    def fake_compile(benchmark, model, out_dir, options):
        (out_dir / "t").mkdir(parents=True)
        return out_dir / "t"

    class FakeJob:
        @staticmethod
        async def create(config):
            raise ValueError(f"bad agent env OPENAI_API_KEY={KNOWN}")

    monkeypatch.setattr(job_runner, "compile_task", fake_compile)
    monkeypatch.setattr(job_runner, "Job", FakeJob)
    request = job_runner.RunRequest(
        benchmark="bfcl",
        model="smollm2-135m",
        agent="nop",
        env="docker",
        runs_dir=tmp_path / "runs",
        run_id="r2",
    )
    with pytest.raises(RunError) as err:
        asyncio.run(job_runner.execute(request))
    assert KNOWN not in str(err.value) and "[REDACTED:PTB_TEST_API_KEY]" in str(err.value)


def test_a_rewritten_file_keeps_its_permissions_but_not_set_id_bits(
    tmp_path: Path, scrubber: Scrubber
) -> None:
    """The new file belongs to whoever scrubs (root, perhaps): an agent's set-id bit must not carry over."""
    path = tmp_path / "run.sh"
    path.write_text(f"#!/bin/sh\necho {KNOWN}\n")
    path.chmod(0o6755)
    assert scrubber.scrub_file(path)
    assert KNOWN not in path.read_text() and path.stat().st_mode & 0o7777 == 0o755
