"""Compile an agent-task config into a Harbor task directory (``ptb agent-task build``).

Layout of the compiled task (``<out>/<name>/``)::

    task.toml            agent runs as an unprivileged user; the verifier runs as root in
                         the agent's environment (not a separate one);
                         healthcheck ``bash /opt/ptb/start.sh`` starts the service
    instruction.md       service URL, endpoints, tiers and budgets, reward mode, how to commit
    environment/
      Dockerfile         base image (build arg) + git + the service's venv
      requirements.txt   the service's own deps: fastapi, uvicorn, pydantic, pyyaml
      ptb-secrets.json   the declared secrets' NAMES (only when the config declares some)
      workspace/         the baseline: ``git archive`` of the committed HEAD -> /app
      ptb/               -> /opt/ptb
        start.sh         creates the agent's user and its git repo (/app, one commit),
                         starts the service as root on 127.0.0.1, waits until it answers
        build.sh         makes agent-task/private root-only (0700)
        lib/             the service's code (posttrainbench.service and what it imports)
        agent-task/private/  task.yaml (in-image paths), data/<split>.jsonl (every named
                         split, hidden ones too), baseline/ (what final scoring re-scores)
    tests/               test.sh (the verifier: quiesce, final scoring, integrity audit, sealed
                         reward) and its own copy of lib/
    solution/            solve.sh + optimize.py (scripted optimizer) + overlay/ (improved files)

Why the verifier runs in the agent's environment: the service's state (ledger, candidate
commits, admin token) only exists in the agent's environment, in root-only directories
the agent's user cannot read or change; the verifier runs there as root after killing
every untrusted process (see ``verifier``). Paths inside the task: ``task_layout``.

Mode B (the candidate is a Harbor agent class): the service runs nested Harbor jobs in the
task's environment, so the venv is made from Python >= 3.12 with Harbor and everything it
needs pinned (``requirement_pins``), the private data holds the inner task dirs, and
``environment/ptb-environment.json`` asks the local sandbox for nested sandboxes; the
Dockerfile refuses to build (no such Python in the CPU image). Candidates get no sockets
in a task built without a network (``candidate_network``).

Secrets are written by NAME only, into ``environment/ptb-secrets.json``; never into
task.toml's ``[environment.env]``/``[verifier.env]``, which Harbor gives to every command,
the agent's too. PostTrainBench's environment plugins take the values from the host
when the trial starts and install them root-only (see ``host.envs.service_secrets``); the
service and the final scoring load them from there. Every declared secret must be set on
the host: the build checks this first, before anything slow or anything written.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

import posttrainbench
from posttrainbench.core.agent_task_layout import LAYOUT
from posttrainbench.core.errors import PtbError
from posttrainbench.core.secrets_file import SECRETS_PATH
from posttrainbench.host.agent_tasks.requirement_pins import pinned_closure
from posttrainbench.host.envs.environment_needs import NEEDS_FILE_NAME, EnvironmentNeeds
from posttrainbench.host.envs.service_secrets import DELIVERING_PLUGINS, write_manifest
from posttrainbench.host.payload import AGENT_TASK_ZONES, MODE_B_ZONES, copy_zones
from posttrainbench.host.staged_output import staged_output
from posttrainbench.host.template_tree import render_tree
from posttrainbench.service.api.scoring import check_scoring_dataset, load_config
from posttrainbench.service.mode_b.task_set import copy_task_splits
from posttrainbench.service.shared.config import AgentTaskConfig, ScoringModeB, Tier
from posttrainbench.service.shared.dataset import named_splits, split_path

REPO_DIR = LAYOUT.repo
PRIVATE_DIR = "environment/ptb/agent-task/private"
# The service's requirements. Mode A: its own four. Mode B also runs Harbor jobs (and the
# local sandbox plugin, which renders templates with jinja2) inside the task, so its venv is
# made from Python >= 3.12 with this machine's Harbor and all it needs, pinned exactly.
SERVICE_REQUIREMENTS = ("fastapi>=0.110", "uvicorn>=0.29", "pydantic>=2.6", "pyyaml>=6.0")
NESTED_HARBOR_ROOTS = ["harbor", "fastapi", "uvicorn", "pydantic", "pyyaml", "jinja2"]
NESTED_MIN_PYTHON = "3.12"
DEFAULT_BASE_IMAGE = "posttrainbench/cpu-base:bookworm"
RUN_OVERHEAD_S = 30  # unpacking a candidate and reaping its uid, beyond the run's own timeout
_GIT_TIMEOUT_S = 120


class BaselineArchiveError(PtbError):
    """The baseline's committed HEAD cannot be taken with ``git archive``."""


class MissingSecretError(PtbError):
    """A secret the config declares is not set in the host environment."""


class BuildOptions(BaseModel):
    """How the task is compiled (everything else comes from the config)."""

    model_config = ConfigDict(extra="forbid")

    port: int = Field(
        default=8765, ge=1024, le=65535, description="the service's port on 127.0.0.1"
    )
    agent_user: str = Field(default="agent", pattern=r"^[a-z_][a-z0-9_-]{0,30}$")
    agent_timeout_sec: int = Field(default=3600, ge=60)
    network_mode: str = Field(
        default="public",
        pattern=r"^(public|no-network)$",
        description="no-network gives the local sandbox a private loopback",
    )
    cpus: int = Field(default=2, ge=1)
    memory_mb: int = Field(default=4096, ge=512)
    base_image: str = DEFAULT_BASE_IMAGE


def check_secrets(config: AgentTaskConfig, environ: Mapping[str, str]) -> None:
    """Raise ``MissingSecretError`` naming every declared secret the host lacks."""
    missing = [name for name in config.secrets if not environ.get(name)]
    if missing:
        raise MissingSecretError(
            f"secret(s) {', '.join(missing)} declared by {config.name!r} are not set "
            "in this environment: export them before building"
        )


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        timeout=_GIT_TIMEOUT_S,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )


def _last_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {result.returncode}"


def archive_baseline(baseline: Path) -> bytes:
    """The tar of the baseline's committed HEAD (``HEAD:<prefix>`` inside a bigger repo).

    Uncommitted changes are never included; a directory outside any git repository or
    without a commit fails with one line.
    """
    baseline = Path(baseline)
    where = _git(baseline, "rev-parse", "--show-toplevel", "--show-prefix")
    if where.returncode != 0:
        raise BaselineArchiveError(
            f"baseline {baseline} is not in a git repository ({_last_line(where)}): commit it first"
        )
    toplevel, prefix = (where.stdout.decode().splitlines() + ["", ""])[:2]
    tree = f"HEAD:{prefix.strip()}" if prefix.strip() else "HEAD"
    # From the top level: git refuses to archive from an untracked working directory.
    result = _git(Path(toplevel), "archive", "--format=tar", tree)
    if result.returncode != 0:
        raise BaselineArchiveError(
            f"cannot git archive {tree} of baseline {baseline}: {_last_line(result)}"
        )
    return result.stdout


def _extract(tar_bytes: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as archive:
        archive.extractall(dest, filter="data")


def _templates() -> tuple[Environment, Path]:
    root = Path(__file__).parent / "templates"
    env = Environment(
        loader=FileSystemLoader(str(root)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env, root


def _split_rows(config: AgentTaskConfig, sizes: dict[str, int]) -> list[dict[str, str]]:
    rows = []
    for name in named_splits(config):
        policy = config.splits.get(name)
        tier = config.tier(name)
        if tier == Tier.HIDDEN or policy is None:
            rows.append(
                {"name": name, "access": "hidden", "size": "-", "budget": "cannot be evaluated"}
            )
            continue
        budget = [
            f"{policy.max_runs} runs" if policy.max_runs is not None else "",
            f"{policy.max_samples} samples" if policy.max_samples is not None else "",
        ]
        access = (
            "viewable"
            if tier == Tier.VIEWABLE
            else f"aggregate-only (min {policy.min_samples} samples)"
        )
        rows.append(
            {
                "name": name,
                "access": access,
                "size": str(sizes[name]),
                "budget": ", ".join(b for b in budget if b),
            }
        )
    return rows


def _requirements(config: AgentTaskConfig) -> list[str]:
    if isinstance(config.scoring, ScoringModeB):
        return pinned_closure(NESTED_HARBOR_ROOTS)
    return list(SERVICE_REQUIREMENTS)


def _context(config: AgentTaskConfig, options: BuildOptions, sizes: dict[str, int]) -> dict:
    evaluable = config.evaluable_splits()
    return {
        "nested": isinstance(config.scoring, ScoringModeB),
        "candidate_network": isinstance(config.scoring, ScoringModeB)
        and candidate_network(config, options.network_mode),
        "requirements": _requirements(config),
        "config": config,
        "options": options,
        "version": posttrainbench.__version__,
        "repo_dir": REPO_DIR,
        "layout": LAYOUT,
        "service_url": f"http://127.0.0.1:{options.port}",
        "split_rows": _split_rows(config, sizes),
        "first_split": evaluable[0] if evaluable else "",
        "zero_reward": {t.key: 0.0 for t in config.reward.targets},
        "secrets_path": SECRETS_PATH,
        "secrets_plugins": DELIVERING_PLUGINS,
        "verifier_timeout_sec": verifier_timeout_sec(config),
    }


def verifier_timeout_sec(config: AgentTaskConfig) -> int:
    """Final scoring re-scores up to top_k candidates and the baseline on the selection split,
    then the chosen code on every target, and the baseline on them again when the chosen
    code cannot be scored: that many runs, each bounded by its timeout plus unpacking and
    reaping, and a margin for the service's drain and the audit."""
    runs = config.reward.top_k + 1 + 2 * len(config.reward.targets)
    return int(
        runs * (config.timeouts.per_eval_s + RUN_OVERHEAD_S) + 300 + config.timeouts.per_eval_s
    )


def _copy_payload(lib: Path, nested: bool) -> None:
    """The service's zones into ``lib/posttrainbench/``; *nested* (Mode B): the whole
    package, for the local sandbox plugin its nested jobs load (``MODE_B_PLUGIN``)."""
    copy_zones(lib, MODE_B_ZONES if nested else AGENT_TASK_ZONES)


def candidate_network(config: AgentTaskConfig, network_mode: str) -> bool:
    """Mode B: whether candidates may open sockets in the compiled task. Unset in the config:
    only where the task has a network. Without one, the only endpoints a candidate's socket
    could reach are the agent's own listeners and the service: a channel out of
    aggregate-only runs, and nothing a candidate needs."""
    assert isinstance(config.scoring, ScoringModeB)
    if config.scoring.candidate_network is not None:
        return config.scoring.candidate_network
    return network_mode != "no-network"


def _write_private(
    config: AgentTaskConfig, baseline_tar: bytes, private: Path, network_mode: str
) -> None:
    """The service's config (paths inside the image), every named split and the baseline."""
    data = private / "data"
    data.mkdir(parents=True)
    if isinstance(config.scoring, ScoringModeB):
        copy_task_splits(config.dataset, data, named_splits(config))
    else:
        for split in named_splits(config):
            shutil.copyfile(split_path(config.dataset, split), split_path(data, split))
    _extract(baseline_tar, private / "baseline")
    dumped = config.model_dump(mode="json", exclude_defaults=False)
    dumped.update(baseline="baseline", dataset="data")
    if isinstance(config.scoring, ScoringModeB):
        dumped["scoring"]["candidate_network"] = candidate_network(config, network_mode)
    (private / "task.yaml").write_text(
        "# Written by `ptb agent-task build`; paths are relative to this file.\n"
        + yaml.safe_dump(dumped, sort_keys=False),
        encoding="utf-8",
    )


def _copy_solution_overlay(config_dir: Path, dest: Path) -> None:
    """``<config dir>/solution/`` (files the scripted optimizer commits), when it exists."""
    source = config_dir / "solution"
    if source.is_dir():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        dest.mkdir(parents=True)


def build_agent_task(
    config_path: Path,
    out_dir: Path,
    options: BuildOptions | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Compile *config_path* into ``out_dir/<name>``; return that path.

    Order: config and dataset, then declared secrets, then the baseline archive; only
    then is anything written (into a staging sibling, renamed into place at the end).
    """
    options = options or BuildOptions()
    config_path = Path(config_path)
    config = load_config(config_path)
    nested = isinstance(config.scoring, ScoringModeB)
    check_secrets(config, os.environ if environ is None else environ)
    sizes = check_scoring_dataset(config)
    baseline_tar = archive_baseline(config.baseline)
    with staged_output(Path(out_dir), config.name) as staging:
        env, root = _templates()
        render_tree(env, root, _context(config, options, sizes), staging)
        _extract(baseline_tar, staging / "environment" / "workspace")
        _write_private(config, baseline_tar, staging / PRIVATE_DIR, options.network_mode)
        _copy_payload(staging / "environment" / "ptb" / "lib", nested)
        _copy_payload(staging / "tests" / "lib", nested)
        _copy_solution_overlay(config_path.resolve().parent, staging / "solution" / "overlay")
        write_manifest(staging / "environment", config.secrets)
        if nested:
            # The local sandbox reads this: a Python that runs Harbor, and room for the
            # nested jobs' own sandboxes.
            needs = EnvironmentNeeds(nested_sandboxes=True, min_python=NESTED_MIN_PYTHON)
            (staging / "environment" / NEEDS_FILE_NAME).write_text(
                needs.model_dump_json(indent=2) + "\n", encoding="utf-8"
            )
    return Path(out_dir) / config.name
