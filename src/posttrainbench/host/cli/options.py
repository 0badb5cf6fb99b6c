"""Command-line options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from posttrainbench.core.errors import PtbError

if TYPE_CHECKING:
    from posttrainbench.host.tasks.options import CompileOptions

# The choices of enumerated options, as Literal types so that Typer lists them in --help and
# rejects anything else. Each mirrors the model field that stores it (tests check they agree).
EnvName = Literal["local", "docker", "modal", "daytona"]  # runner.environments.ENV_NAMES
FeedbackName = Literal["test", "dev", "none"]  # tasks.options.CompileOptions.feedback
VariantName = Literal["posttrainbench", "smoke"]  # schemas.EvalVariant
ModelSource = Literal["image", "cache"]  # tasks.options.CompileOptions.model_from
AuthName = Literal["auto", "api-key", "subscription"]  # credentials.resolve.AuthMode

# The one hint for the flag that changed meaning: `-m` was the base model, it is now the
# agent's model as in `harbor run`. The CLI answers an old use with it, never reinterprets.
MODEL_HINT = (
    "-m/--model is the agent's model (as in `harbor run`); the base model is -M/--base-model"
)
# Spellings that were renamed to the shared vocabulary (README "Commands"), or that a
# neighbouring tool uses for the same thing: a use answers with ours (exit 2). Keyed by
# (command name or "*", the flag).
RENAMED: dict[tuple[str, str], str] = {
    ("*", "-m"): MODEL_HINT,
    ("*", "--model"): MODEL_HINT,
    ("eval", "-m"): "ptb eval takes a model directory: --model-path DIR",
    ("eval", "--model"): "ptb eval takes a model directory: --model-path DIR",
    ("*", "--models"): "--models is now -M/--base-model (repeatable)",
    ("*", "--benchmarks"): "--benchmarks is now -b/--benchmark (repeatable)",
    ("*", "--agents"): "--agents is now -a/--agent (repeatable)",
    ("*", "--agent-model"): "--agent-model is now -m/--model (as in `harbor run`)",
    ("*", "--concurrency"): "--concurrency is now -n/--n-concurrent (as in `harbor run`)",
    ("*", "--attempts"): "--attempts is now -k/--n-attempts (as in `harbor run`)",
    ("*", "--to"): "--to is now -o/--out",
    ("*", "--out-dir"): "--out-dir is now -o/--out",
    ("*", "--tasks"): "ptb names benchmarks with -b/--benchmark (lm-eval's --tasks); "
    "`ptb list benchmarks` shows them",
    ("judge", "--base-model"): "ptb judge's base model directory is now --base-model-dir "
    "(-M/--base-model is a catalog id elsewhere)",
}


def renamed_hint(command: str | None, flag: str) -> str | None:
    """The one-line hint for a flag this command no longer has, if it was renamed."""
    return RENAMED.get((command or "", flag)) or RENAMED.get(("*", flag))


def split_ids(values: list[str] | None) -> list[str]:
    """Ids of a repeatable option, each value also split on commas (`-b a,b -b c`)."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def not_a_base_model(value: str | None) -> str | None:
    """`-m` took Harbor's meaning (the agent's model): a catalog base-model id given to it
    is the old habit, answered with the new spelling rather than handed to the agent."""
    if value is not None:
        from posttrainbench.host.catalog import list_models

        if value in {m.id for m in list_models()}:
            raise PtbError(MODEL_HINT)
    return value


Benchmark = typer.Option(
    ..., "-b", "--benchmark", metavar="ID", help="Benchmark id (see `ptb list benchmarks`)."
)
Benchmarks = typer.Option(
    [],
    "-b",
    "--benchmark",
    metavar="ID",
    show_default=False,
    help="Benchmark id (see `ptb list benchmarks`); repeatable, or comma-separated.",
)
BaseModelId = typer.Option(
    ..., "-M", "--base-model", metavar="ID", help="Base model id (see `ptb list models`)."
)
BaseModelIds = typer.Option(
    [],
    "-M",
    "--base-model",
    metavar="ID",
    show_default=False,
    help="Base model id (see `ptb list models`); repeatable, or comma-separated.",
)
Agent = typer.Option(
    ...,
    "-a",
    "--agent",
    metavar="AGENT",
    help="Harbor agent name (oracle, nop, claude-code, codex, ...) or module:Class, "
    "as in `harbor run`.",
)
AgentModel = typer.Option(
    None,
    "-m",
    "--model",
    metavar="MODEL",
    callback=not_a_base_model,
    help="The agent's model, as in `harbor run`, e.g. anthropic/claude-opus-4-1.",
)
NConcurrent = typer.Option(
    1, "-n", "--n-concurrent", min=1, metavar="N", help="Trials run at once (as in `harbor run`)."
)
NAttempts = typer.Option(
    1, "-k", "--n-attempts", min=1, metavar="N", help="Trials per task (as in `harbor run`)."
)
AuthOpt = typer.Option(
    "auto",
    "--auth",
    help="How the agent authenticates: auto (a subscription credential if its file exists, "
    "else an API key), api-key or subscription.",
)
SecretsDir = typer.Option(
    None,
    "--secrets-dir",
    metavar="DIR",
    help="Directory of subscription credential files, outside the repository "
    "(default $PTB_SECRETS_DIR, else ~/.config/posttrainbench/secrets).",
)
RepromptMinMinutes = typer.Option(
    None,
    "--reprompt-min-minutes",
    metavar="MINUTES",
    help="Start an agent that stops early again (with a continuation "
    "prompt) while at least this many minutes of its time are left.",
)
Json = typer.Option(
    False,
    "--json",
    help="Print the result as JSON on stdout (progress and warnings go to stderr).",
)


def runs_dir_option(default: Path, help: str) -> Any:
    """`-o/--runs-dir`: the directory each run's own directory is written under (the
    counterpart of `harbor run -o/--jobs-dir`)."""
    return typer.Option(default, "-o", "--runs-dir", metavar="DIR", help=help)


def out_option(default: Any, help: str) -> Any:
    """`-o/--out`: the one file or directory a command writes (`...` makes it required)."""
    return typer.Option(default, "-o", "--out", metavar="PATH", help=help)


Hours = typer.Option(10.0, "--hours", metavar="HOURS", help="The agent's time budget in hours.")
Gpus = typer.Option(
    None, "--gpus", metavar="N", help="GPUs per task (default 1; 0 for the offline CPU model)."
)
Cpus = typer.Option(16, "--cpus", metavar="N", help="CPU cores the task asks for.")
MemoryGb = typer.Option(128, "--memory-gb", metavar="GB", help="Memory the task asks for, in GB.")
BaseImage = typer.Option(
    None,
    "--base-image",
    help="Docker base image (default: the pinned CUDA image of docs/gpu-image.md with "
    "GPUs, else posttrainbench/cpu-base:bookworm from scripts/docker/build_base_image.sh).",
)
ModelFrom = typer.Option(
    "image",
    "--model-from",
    help="Where the base model comes from: image (downloaded "
    "into the task image at build) or cache (the shared cache volume; `ptb cache push`).",
)
CacheVolume = typer.Option(
    None,
    "--cache-volume",
    help="--env modal|daytona: a volume with base models and "
    "data (`ptb cache push`), mounted read-only at /ptb-cache in every sandbox.",
)
GpuType = typer.Option(
    None,
    "--gpu-type",
    help="The one GPU type GPU tasks ask for (default H100; task.toml gpu_types).",
)
Variant = typer.Option(
    None,
    "--variant",
    help="The final evaluation: posttrainbench (its max tokens and retry cascade; the "
    "default with a GPU) or smoke (small token caps for CPU runs; the default without one). "
    "They are different task versions, never mixed on a leaderboard.",
)
EvalLimit = typer.Option(
    None, "--eval-limit", help="Score only the first N test questions (smoke tests; default: all)."
)
TrainSteps = typer.Option(
    None,
    "--train-steps",
    min=1,
    metavar="N",
    help="Optimizer steps of the reference fine-tune (default: the solution's, 20): a fixed "
    "amount of training, so the result does not depend on how busy the machine is, only its "
    "time; a smoke task trains fewer.",
)
Feedback = typer.Option(
    "test",
    "--feedback",
    help="What the agent's evaluate.py scores: test (the scored test set, "
    "PostTrainBench parity), dev (a disjoint held-out split) or none.",
)
EvalBudget = typer.Option(
    None, "--eval-budget", help="Max evaluate.py runs for the agent (default: unlimited)."
)
Offline = typer.Option(
    False,
    "--offline",
    help="Use only the prepared-data cache (`ptb data prepare`); never download.",
)


# Harbor's own `harbor run` flags, passed through by `ptb run` (same names and spellings).
AgentKwargs = typer.Option(
    [],
    "--ak",
    "--agent-kwarg",
    metavar="KEY=VALUE",
    show_default=False,
    help="An agent keyword argument, as `harbor run --ak` (repeatable).",
)
AgentEnv = typer.Option(
    [],
    "--ae",
    "--agent-env",
    metavar="KEY=VALUE",
    show_default=False,
    help="A variable for the agent's environment, as `harbor run --ae` (repeatable).",
)
EnvironmentKwargs = typer.Option(
    [],
    "--ek",
    "--environment-kwarg",
    metavar="KEY=VALUE",
    show_default=False,
    help="An environment keyword argument, as `harbor run --ek` (repeatable).",
)
MaxRetries = typer.Option(
    0,
    "--max-retries",
    min=0,
    metavar="N",
    help="Retries of a trial that failed on infrastructure or in the verifier (never of the "
    "agent's own outcome: that would be an extra attempt).",
)
JobName = typer.Option(
    None,
    "--job-name",
    metavar="NAME",
    help="The run's (and its Harbor job's) name: its directory under the runs dir.",
)
DryRun = typer.Option(
    False,
    "--dry-run",
    help="Compile the task and write the Harbor job config; print it and run nothing.",
)


def key_values(values: list[str], flag: str) -> dict[str, str]:
    """`KEY=VALUE` pairs of a repeatable flag; one malformed is a PtbError naming the flag."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise PtbError(f"invalid {flag} {value!r}: expected KEY=VALUE")
        pairs[key.strip()] = rest
    return pairs


def check_cache_flags(env: str, model_from: str, cache_volume: str | None) -> None:
    """`--cache-volume` only where volumes exist, and `--model-from cache` only with one."""
    if cache_volume is not None and env not in ("modal", "daytona"):
        raise PtbError(f"--cache-volume: only with --env modal or daytona, not {env}")
    if model_from == "cache" and cache_volume is None:
        raise PtbError(
            "--model-from cache needs --cache-volume VOLUME (and --env modal or daytona)"
        )


def compile_options(**values: Any) -> CompileOptions:
    """Build CompileOptions, turning a validation failure into one clear line."""
    from pydantic import ValidationError

    from posttrainbench.host.tasks.options import CompileOptions

    try:
        return CompileOptions(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise PtbError(f"invalid --{field.replace('_', '-')}: {first['msg']}") from None
