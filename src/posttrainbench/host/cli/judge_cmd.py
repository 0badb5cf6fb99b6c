"""`ptb judge TRIAL_DIR`: run the integrity judges on a finished Harbor trial, on the host."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from posttrainbench.core.errors import PtbError
from posttrainbench.core.verdict import JUDGE_IDS, Judgement
from posttrainbench.host.cli.json_output import stdout_to_stderr
from posttrainbench.host.cli.options import Json, out_option


class JudgeOptionError(PtbError):
    """A `ptb judge` argument cannot be used."""


def _task_dir(trial_dir: Path, task: Path | None) -> Path:
    """The trial's task directory: --task, else config.json's task.path."""
    if task is not None:
        if not (task / "tests" / "task.json").is_file():
            raise JudgeOptionError(f"{task} is not a compiled task directory (no tests/task.json)")
        return task
    config = trial_dir / "config.json"
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
        path = Path(raw["task"]["path"])
    except (OSError, ValueError, KeyError, TypeError):
        raise JudgeOptionError(
            f"cannot find the task of {trial_dir} (no readable task.path in {config}); "
            "pass --task TASK_DIR"
        ) from None
    for candidate in (
        path,
        trial_dir / path,
        trial_dir.parent / path,
        trial_dir.parent.parent / path,
    ):
        if (candidate / "tests" / "task.json").is_file():
            return candidate
    raise JudgeOptionError(
        f"the task directory {path} of {trial_dir} no longer exists; pass --task TASK_DIR"
    )


def _cached_base_model(task_dir: Path) -> Path | None:
    """The base model the local sandbox built for this task, if it is in the cache."""
    try:
        from posttrainbench.host.envs.env_cache import plan_layers, resolve_task_python

        environment_dir = task_dir / "environment"
        layers = plan_layers(environment_dir, resolve_task_python(environment_dir))
    except Exception:  # no sandbox python here: the judge reports the missing base model
        return None
    for layer in reversed(layers):  # the topmost layer that has one, as in the sandbox's /opt/ptb
        base = layer.entry / "models" / "base"
        if (base / "config.json").is_file():
            return base
    return None


def _trial_inputs(trial_dir: Path) -> tuple[dict[str, Path | None], list[str]]:
    """The judges' inputs inside the trial directory, and '<path>: <why>' for each refused.

    The agent wrote them: one that is a link (or a FIFO, or a file where a directory
    belongs) is refused, never followed to whatever host directory it names.
    """
    from posttrainbench.core.nofollow import kind_of
    from posttrainbench.core.safe_fs import SafeDir
    from posttrainbench.task.integrity.traces.trial_files import artifacts_subdir

    found: dict[str, Path | None] = {}
    refused: list[str] = []
    with SafeDir.open(trial_dir) as root:
        artifacts = artifacts_subdir(root)
        wanted = {
            "final_model": f"{artifacts}/final_model",
            "code_snapshot": f"{artifacts}/code_snapshot",
            "data_files": f"{artifacts}/data_files",
            "agent": "agent",
            "agent_logs": f"{artifacts}/agent_logs",
            "write_set": f"{artifacts}/write_set",
        }
        for key, relative in wanted.items():
            st = root.lstat(relative)
            found[key] = (
                trial_dir / relative if st is not None and stat.S_ISDIR(st.st_mode) else None
            )
            if st is not None and found[key] is None:
                refused.append(f"{relative}: {kind_of(st.st_mode)}")
    return found, refused


def _keep_decided(host: Judgement, verifier_dir: Path, out: Path) -> Judgement:
    """The host's verdict, unless it could not decide where the verifier did (a base model
    no longer cached, a file the verifier had): then the verifier's, saying why, so a
    re-judge never turns a decided verdict into 'undecided'."""
    if host.flagged is not None or host.decided_by == "override":
        return host
    try:
        kept = Judgement.read(verifier_dir / Judgement.filename(host.judge))
    except (OSError, ValueError):
        return host
    if kept.flagged is None:
        return host
    kept.justification += (
        f" [kept from the verifier's judgement: the host re-judge could not decide "
        f"({host.justification[:300]})]"
    )
    kept.write(out)
    return kept


def judge(
    trial_dir: Path = typer.Argument(
        ..., help="A Harbor trial directory (agent/, artifacts/, config.json)."
    ),
    judges: str = typer.Option(
        None,
        "--judges",
        metavar="ID,...",
        help=f"Comma-separated judge ids (default: all): {', '.join(JUDGE_IDS)}.",
    ),
    llm_votes: int = typer.Option(
        None,
        "--llm-votes",
        metavar="N",
        show_default=False,
        help="LLM reviews per judge (majority vote; 0 = none). Needs PTB_INTEGRITY_JUDGE_MODEL; "
        "default 1 with it, none without.",
    ),
    override: Path = typer.Option(
        None,
        "--override",
        metavar="FILE",
        help="overrides.json: manual verdicts that win over all.",
    ),
    out_dir: Path = out_option(
        None, "The directory for judgement_<id>.json (default TRIAL_DIR/judges)."
    ),
    task: Path = typer.Option(
        None,
        "--task",
        metavar="DIR",
        help="The task directory (default: from the trial's config.json).",
    ),
    base_model: Path = typer.Option(
        None,
        "--base-model-dir",
        metavar="DIR",
        help="The base model directory (default: the task's cached environment).",
    ),
    reference: Path = typer.Option(
        None,
        "--reference",
        metavar="FILE",
        help="The sealed test set (default: the task's tests/data/<benchmark>/test.jsonl).",
    ),
    allow_api: list[str] = typer.Option(
        [],
        "--allow-api",
        metavar="PROVIDER",
        show_default=False,
        help="A paid-API provider id the agent may use (repeatable).",
    ),
    as_json: bool = Json,
) -> None:
    """Judge a finished trial: contamination, disallowed model, API usage, benchmark lookup, anomalies.

    Example: ptb judge ptb-runs/<run id>/jobs/<run id>/<trial> --judges contamination,anomaly
    """
    from posttrainbench.task.integrity.judges.inputs import (
        JudgeContext,
        JudgeInputError,
        JudgeInputs,
    )
    from posttrainbench.task.integrity.judges.precedence import load_overrides
    from posttrainbench.task.integrity.judges.runner import parse_judge_ids, run_judges
    from posttrainbench.task.schemas import TaskSpec

    if not trial_dir.is_dir():
        raise JudgeOptionError(f"trial directory {trial_dir} does not exist")
    if llm_votes is not None and llm_votes < 0:
        raise JudgeOptionError("--llm-votes must be 0 or more")
    from posttrainbench.task.integrity.judges.llm_review import MODEL_ENV, review_model

    # Votes asked for that no model can give would read as a review that found nothing.
    if llm_votes and review_model() is None:
        raise JudgeOptionError(
            f"--llm-votes {llm_votes} needs a review model: set {MODEL_ENV} (or --llm-votes 0)"
        )
    votes = 1 if llm_votes is None else llm_votes
    for name, path in (("--base-model-dir", base_model), ("--reference", reference)):
        if path is not None and not path.exists():
            raise JudgeOptionError(f"{name} {path} does not exist")
    try:
        ids = parse_judge_ids(judges)
        overrides = load_overrides(override) if override is not None else {}
    except JudgeInputError as exc:
        raise JudgeOptionError(str(exc)) from None
    task_dir = _task_dir(trial_dir, task)
    spec = TaskSpec.load(task_dir / "tests" / "task.json")
    found, refused = _trial_inputs(trial_dir)

    def existing(path: Path | None) -> Path | None:
        return path if path is not None and path.exists() else None

    inputs = JudgeInputs(
        benchmark=spec.benchmark,
        feedback=spec.feedback,
        base_model_source=spec.model_source,
        final_model=found["final_model"],
        code_snapshot=found["code_snapshot"],
        data_files=found["data_files"],
        write_set=found["write_set"],
        agent_logs=[p for p in (found["agent"], found["agent_logs"]) if p is not None][:1],
        trial_dir=trial_dir,
        verifier_metrics=trial_dir / "verifier" / "metrics.json",
        reference=reference or task_dir / "tests" / "data" / spec.benchmark / "test.jsonl",
        base_model=base_model or _cached_base_model(task_dir),
        pristine_workspace=existing(task_dir / "environment" / "workspace"),
        allowed_apis=list(allow_api),
    )
    out = out_dir or trial_dir / "judges"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JudgeOptionError(f"cannot write to output directory {out}: {exc.strerror}") from None
    console = Console()
    for line in refused:
        Console(stderr=True).print(
            f"warning: refused: {escape(line)}", highlight=False, soft_wrap=True
        )
    # Judging takes seconds to minutes (the contamination scan): say so before it starts.
    Console(stderr=True).print(
        f"judging {escape(str(trial_dir))}: {', '.join(ids)} (each judge under its own time cap) ...",
        highlight=False,
        soft_wrap=True,
    )
    with stdout_to_stderr(as_json):
        results = run_judges(JudgeContext(inputs), out, ids, votes, overrides)
    results = [_keep_decided(j, trial_dir / "verifier", out) for j in results]
    if as_json:
        typer.echo(json.dumps([j.model_dump(mode="json") for j in results], indent=2))
        return
    for j in results:
        state = {
            True: "[bold red]flagged[/]",
            False: "[green]clean[/]",
            None: "[yellow]undecided[/]",
        }[j.flagged]
        console.print(
            f"{j.judge}: {state} ({j.decided_by}) {escape(j.justification[:200])}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"judgements written to {escape(str(out))}")
