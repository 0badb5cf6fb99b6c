"""`ptb sweep --env condor` writes one submit file per trial that HTCondor's own parser
reads, with no secret value in any file. No test here contacts a cluster: submit files are
parsed by the `htcondor` bindings offline, and `condor_submit` is at most a fake script.

HTCondor 25's wheel ships its bindings as `htcondor2` (the version-1 `htcondor` module is
gone); `htcondor2.Submit(text)` parses a submit description without a running HTCondor
and without a config file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from harbor.models.job.config import JobConfig

from posttrainbench.core.errors import PtbError
from posttrainbench.host.sweep.condor import (
    CondorError,
    CondorSettings,
    sanitize_label,
    submit_arguments,
    write_condor_files,
)
from posttrainbench.host.sweep.runner import SweepRequest, run_sweep
from posttrainbench.host.sweep.spec import SweepSpec, parse_agents
from posttrainbench.host.tasks.options import CompileOptions
from posttrainbench.task.integrity.agentic.config import AGENTIC_ENV
from tests.data_fixtures import seed_prepared
from tests.helpers import run_ptb

# The bindings are a Linux-only dev dependency (HTCondor ships no other wheels); CI and
# `make test` run on Linux, where they are always installed. Only these tests use them
# (posttrainbench.host.sweep.condor does not import them), so the skip can follow the imports.
htcondor = pytest.importorskip(
    "htcondor2", reason="HTCondor's Python bindings exist for Linux only"
)

# The brief's pair is bfcl + humaneval; humaneval is `implemented: false` in the catalog
# (compiling it stops with "has no evaluator yet"), so gsm8k stands in until it lands.
BENCHMARKS = ["bfcl", "gsm8k"]
MODEL = "smollm2-135m"
AGENTS = "nop,claude-code:anthropic/claude-opus-4-1"
CANARY = "sk-ant-canary-5f1d9c0e7b2a4c83-never-in-a-file"
REQUIREMENTS = '(CUDACapability >= 8.0) && (GPUs_DeviceName == "NVIDIA H100 80GB HBM3")'


def _no_condor_path(tmp: Path) -> str:
    """PATH without any condor_submit, so nothing can reach a cluster."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "condor_submit").exists()
    ]
    return os.pathsep.join(keep)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Placeholder prepared data (no network), shared by the tests of this module."""
    root = tmp_path_factory.mktemp("cache")
    for benchmark in BENCHMARKS:
        seed_prepared(root, benchmark)
    return root


@pytest.fixture(scope="module")
def env(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """A canary API key, the seeded cache, and no condor_submit on PATH."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PTB_CACHE_DIR", str(cache))
        mp.setenv("ANTHROPIC_API_KEY", CANARY)
        mp.setenv("HARBOR_TELEMETRY", "0")
        mp.setenv("PATH", _no_condor_path(tmp_path_factory.getbasetemp()))
        yield mp


def _spec(**options: object) -> SweepSpec:
    return SweepSpec(
        benchmarks=BENCHMARKS,
        models=[MODEL],
        agents=parse_agents(AGENTS),
        env="condor",
        attempts=2,
        options=CompileOptions(hours=1, **options),
    )


@pytest.fixture(scope="module")
def sweep(env, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 benchmarks x 1 model x 2 agents x 2 attempts, dry run: 8 trials."""
    out = tmp_path_factory.mktemp("sweeps") / "condor-sweep"
    outcome = run_sweep(
        SweepRequest(
            spec=_spec(gpus=1, cpus=16, memory_gb=96, storage_gb=150),
            out=out,
            dry_run=True,
            condor_requirements=REQUIREMENTS,
        )
    )
    assert not outcome.ran and not outcome.submitted and outcome.note is None
    subs = (out / "condor").glob("*.sub")
    assert (
        sorted(outcome.commands) == sorted(f"condor_submit {p}" for p in subs)
        and len(outcome.commands) == 8
    )
    return out


def _submit(path: Path) -> htcondor.Submit:
    return htcondor.Submit(path.read_text(encoding="utf-8"))


def test_condor_files_parse_without_contacting_a_cluster(sweep: Path) -> None:
    condor = sweep / "condor"
    subs = sorted(condor.glob("*.sub"))
    expected = sorted(
        f"{b}-{MODEL}__{agent}__a{k}.sub"
        for b in BENCHMARKS
        for agent in ("nop", "claude-code-anthropic-claude-opus-4-1")
        for k in (1, 2)
    )
    assert [p.name for p in subs] == expected and len(subs) == 8
    wrapper = condor / "run_trial.sh"
    assert os.access(wrapper, os.X_OK)
    for path in subs:
        submit = _submit(path)
        name = path.stem
        assert submit["executable"] == str(wrapper)
        assert submit["arguments"] == f"\"'{condor / 'configs' / name}.json'\""
        assert submit["request_gpus"] == "1"
        assert submit["request_cpus"] == "16"
        assert submit["request_memory"] == "96GB"
        assert submit["request_disk"] == "150GB"
        assert submit["requirements"] == REQUIREMENTS
        assert submit["universe"] == "vanilla" and submit["should_transfer_files"] == "NO"
        for key, ext in (("log", "log"), ("output", "out"), ("error", "err")):
            assert submit[key] == str(condor / "logs" / f"{name}.{ext}")
        assert (condor / "logs").is_dir()
        assert submit.getQArgs() == "1"
        # Names only; condor_submit copies the values. Every task's verifier takes the
        # (opt-in) agentic judges' settings, so every job lists them.
        agent_keys = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"] if "claude-code" in name else []
        assert submit["getenv"] == ", ".join(sorted({*agent_keys, *AGENTIC_ENV}))
        assert "environment" not in submit.keys()


def test_condor_wrapper_runs_one_harbor_trial_without_contacting_a_cluster(sweep: Path) -> None:
    text = (sweep / "condor" / "run_trial.sh").read_text()
    assert "export HARBOR_TELEMETRY=0" in text
    assert ' run --yes -c "$1"' in text
    assert 'exit "${status}"' in text


def test_condor_trial_configs_are_harbor_job_configs_without_contacting_a_cluster(
    sweep: Path,
) -> None:
    configs = sorted((sweep / "condor" / "configs").glob("*.json"))
    assert len(configs) == 8
    names = set()
    for path in configs:
        config = JobConfig.model_validate_json(path.read_text())
        assert config.n_attempts == 1 and len(config.tasks) == 1 and len(config.agents) == 1
        assert config.job_name == path.stem and config.jobs_dir == sweep / "jobs"
        assert config.environment.type is not None and config.environment.type.value == "docker"
        task, label, attempt = path.stem.split("__")
        assert config.tasks[0].path == sweep / "tasks" / task and attempt in ("a1", "a2")
        agent = config.agents[0]
        assert (
            sanitize_label(f"{agent.name}:{agent.model_name}" if agent.model_name else agent.name)
            == label
        )
        assert not agent.env  # keys come from the job's environment, never from a file
        names.add(config.job_name)
    assert len(names) == 8


def test_no_secret_value_in_any_condor_file_without_contacting_a_cluster(sweep: Path) -> None:
    assert os.environ["ANTHROPIC_API_KEY"] == CANARY
    files = [p for p in sweep.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sub" for p in files)
    leaked = [str(p) for p in files if CANARY.encode() in p.read_bytes()]
    assert leaked == []


def test_fake_condor_submit_gets_every_file_without_contacting_a_cluster(
    sweep: Path, tmp_path: Path, env: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "submitted.txt"
    fake = bin_dir / "condor_submit"
    fake.write_text(f'#!/bin/sh\necho "$1" >> {record}\necho "1 job(s) submitted to cluster 7."\n')
    fake.chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        spec = _spec(gpus=1, cpus=16, memory_gb=96, storage_gb=150)
        outcome = run_sweep(SweepRequest(spec=spec, out=sweep, condor_requirements=REQUIREMENTS))
        assert len(outcome.submitted) == 8 and not outcome.commands
        assert sorted(record.read_text().split()) == sorted(
            str(p) for p in (sweep / "condor").glob("*.sub")
        )
        ledger = json.loads((sweep / "condor" / "submitted.json").read_text())
        assert len(ledger["trials"]) == 8 and {t["cluster"] for t in ledger["trials"].values()} == {
            "7"
        }
        # The same command again: everything was submitted before, nothing is submitted twice.
        again = run_sweep(SweepRequest(spec=spec, out=sweep, condor_requirements=REQUIREMENTS))
        assert (
            again.submitted == []
            and len(again.skipped) == 8
            and len(record.read_text().split()) == 8
        )
        # A finished trial that errored is moved aside and submitted again (the retry policy).
        name = sorted(ledger["trials"])[0]
        _fake_result(sweep / "jobs" / name / "t1", errored=True)
        other = sorted(ledger["trials"])[1]
        _fake_result(sweep / "jobs" / other / "t1", errored=False)
        retried = run_sweep(SweepRequest(spec=spec, out=sweep, condor_requirements=REQUIREMENTS))
        assert retried.submitted == [name] and any(
            s.startswith(f"{other}: finished") for s in retried.skipped
        )
        assert (sweep / "retired").is_dir() and not (sweep / "jobs" / name).exists()
        (sweep / "condor" / "submitted.json").unlink()
        fake.write_text(
            "#!/bin/sh\necho 'ERROR: Failed to connect to local queue manager' >&2\nexit 1\n"
        )
        with pytest.raises(CondorError) as info:
            run_sweep(SweepRequest(spec=spec, out=sweep, condor_requirements=REQUIREMENTS))
        message = str(info.value)
        assert "\n" not in message and "failed (exit 1)" in message and "0 of 8" in message
        assert "Failed to connect to local queue manager" in message
        mp.delenv("ANTHROPIC_API_KEY")  # getenv would have nothing to copy: stop before submitting
        with pytest.raises(PtbError, match="ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN"):
            run_sweep(SweepRequest(spec=spec, out=sweep, condor_requirements=REQUIREMENTS))


def _fake_result(trial: Path, *, errored: bool) -> None:
    """A finished Harbor trial result: errored (an exception) or scored."""
    from tests.results_fixtures import TrialSpec, write_trial

    made = write_trial(
        trial.parent,
        TrialSpec(
            error="EnvironmentStartTimeoutError" if errored else None,
            score=None if errored else 0.5,
        ),
        name=trial.name,
    )
    assert made == trial


def test_singularity_needs_a_prebuilt_image_without_contacting_a_cluster(
    sweep: Path, tmp_path: Path
) -> None:
    task = tmp_path / "tasks" / f"bfcl-{MODEL}"
    shutil.copytree(sweep / "tasks" / task.name, task)
    spec = SweepSpec(benchmarks=["bfcl"], models=[MODEL], agents=parse_agents("nop"), env="condor")
    settings = CondorSettings.for_sweep(spec, tmp_path, environment="singularity")
    with pytest.raises(CondorError, match="prebuilt image"):
        write_condor_files(tmp_path, spec, [task], settings)
    toml = task / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            "[environment]\n", '[environment]\ndocker_image = "/shared/ptb.sif"\n', 1
        )
    )
    files = write_condor_files(tmp_path, spec, [task], settings)
    config = JobConfig.model_validate_json(files.trials[0].config_file.read_text())
    assert config.environment.type is not None and config.environment.type.value == "singularity"
    assert config.environment.kwargs == {
        "singularity_image_cache_dir": str(tmp_path.resolve() / "condor/sif-cache")
    }
    submit = _submit(files.trials[0].submit_file)
    assert (
        submit["request_gpus"] == "1"
    )  # the spec names no --gpus: the task's own count (compiled with 1)
    assert "requirements" not in submit.keys()


def test_a_multiline_requirement_stops_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with pytest.raises(CondorError, match="invalid --condor-requirements"):
        run_sweep(
            SweepRequest(spec=_spec(), out=out, dry_run=True, condor_requirements="true\nqueue 100")
        )
    assert not out.exists()


def test_submit_arguments_round_trip_through_htcondor() -> None:
    text = f"executable = /bin/true\narguments = {submit_arguments('/a dir/it' + chr(39) + 's.json')}\nqueue 1\n"
    assert htcondor.Submit(text)["arguments"] == "\"'/a dir/it''s.json'\""


def test_cli_prints_condor_submit_commands_without_contacting_a_cluster(
    cache: Path, tmp_path: Path
) -> None:
    env = {
        "PTB_CACHE_DIR": str(cache),
        "PATH": _no_condor_path(tmp_path),
        "ANTHROPIC_API_KEY": CANARY,
    }
    out = tmp_path / "cli-sweep"
    result = run_ptb(
        "sweep",
        "-e",
        "condor",
        "-b",
        "bfcl",
        "-M",
        MODEL,
        "-a",
        "nop",
        "-k",
        "2",
        "-o",
        str(out),
        "--condor-requirements",
        "(CUDACapability >= 8.0)",
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    subs = [out / "condor" / f"bfcl-{MODEL}__nop__a{k}.sub" for k in (1, 2)]
    assert "condor_submit is not on PATH" in result.stdout
    for sub in subs:
        assert f"condor_submit {sub}" in result.stdout
        submit = _submit(sub)
        assert submit["requirements"] == "(CUDACapability >= 8.0)"
        assert (
            submit["request_gpus"] == "0"
        )  # no --gpus: the offline CPU model's task asks for none

    bad = run_ptb(
        "sweep",
        "-e",
        "condor",
        "-b",
        "bfcl",
        "-M",
        MODEL,
        "-a",
        "nop",
        "--dry-run",
        "-o",
        str(tmp_path / "bad"),
        "--condor-env",
        "podman",
        env=env,
    )
    assert bad.returncode == 2, bad.stderr
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and lines[0].startswith("error:")
        and "'podman' is not one of 'docker', 'singularity'" in lines[0]
    )
    assert not (tmp_path / "bad").exists()
    json.loads((out / "sweep.json").read_text())  # the sweep's spec is on disk for a resume
