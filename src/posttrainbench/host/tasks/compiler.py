"""Render one Harbor task directory per (benchmark, base model) from template files.

The output is written to a temporary sibling directory and renamed into place, so an
interrupted or failed compilation never leaves a half-written task behind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

import posttrainbench
from posttrainbench.core.errors import PtbError
from posttrainbench.core.model_task_layout import MODEL_LAYOUT
from posttrainbench.host.catalog import (
    BaseModelSpec,
    BenchmarkSpec,
    get_benchmark,
    get_model,
)
from posttrainbench.host.data.prepare import DataPrepareError, prepare_benchmark, task_splits
from posttrainbench.host.envs.layer_manifest import MANIFEST_PATH, LayerManifest
from posttrainbench.host.payload import HOST, MODEL_TASK_ZONES, TASK, copy_zones, package_root
from posttrainbench.host.staged_output import staged_output
from posttrainbench.host.tasks.gpu_image import (
    agent_clis_package_json,
    gpu_requirements,
    load_gpu_image_pins,
)
from posttrainbench.host.tasks.layers import (
    JUDGE_BUILD,
    JUDGE_REQUIREMENTS,
    dockerfile_steps,
    model_task_layers,
)
from posttrainbench.host.tasks.options import (
    DEFAULT_CPU_BASE_IMAGE,
    DEFAULT_GPU_TYPE,
    CompileOptions,
)
from posttrainbench.host.tasks.prompt import gpu_line, hours_text, render_prompt
from posttrainbench.host.tasks.task_version import stamp as stamp_version
from posttrainbench.host.template_tree import render_tree
from posttrainbench.task.benchmarks.datafiles import write_split
from posttrainbench.task.benchmarks.plugin import plugins
from posttrainbench.task.evaluation.watchdog import OUTER_RESERVE_S
from posttrainbench.task.integrity.agentic.config import AGENTIC_ENV
from posttrainbench.task.integrity.contamination.reference import (
    reference_from_split,
    write_reference,
)
from posttrainbench.task.integrity.contamination.tokens import cl100k_file
from posttrainbench.task.integrity.judges.limits import LIMITS_FILE_NAME
from posttrainbench.task.sandbox.writable_roots import ASSEMBLY_GAP_S
from posttrainbench.task.schemas import TaskSpec

# The contamination checker's default reference in the agent's environment (test mode).
AGENT_REFERENCE_NAME = "contamination_reference.json"
SOLUTION_MODULES = {"bfcl": "posttrainbench.task.training.sft_bfcl"}
FEEDBACK_TEXT = {
    "test": "the benchmark's test set: the same questions the final evaluation scores",
    "dev": "a development split held out from the benchmark, disjoint from the test set the final evaluation scores",
    "none": "",
}
# The reference solution trains a fixed number of steps; this share of the agent's time
# caps it only so that a model is saved before the agent's deadline on a very slow machine.
SOLUTION_TIME_SHARE = 0.8
# Passed from the host to the verifier of LLM-judged benchmarks (empty when unset; the
# judge then fails with one clear error naming the missing key).
PROVIDER_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL")
JUDGE_ENV = ("PTB_JUDGE_MODEL", *PROVIDER_ENV)
# The integrity judges' optional LLM review (opt-in through PTB_INTEGRITY_JUDGE_MODEL).
# It runs in the verifier of tasks that install litellm (the LLM-judged benchmarks);
# for the others, `ptb judge TRIAL_DIR` runs it on the host after the trial.
INTEGRITY_ENV = ("PTB_INTEGRITY_JUDGE_MODEL", "PTB_INTEGRITY_LLM_VOTES", *PROVIDER_ENV)
# PostTrainBench's agentic judges (task/integrity/agentic, opt-in through their model and key):
# every model task's verifier can run them, so every task passes these on (empty: skipped).
AGENTIC_JUDGE_ENV = AGENTIC_ENV
SNAPSHOT_MAX_FILE_BYTES = 512 * 1024
SNAPSHOT_MAX_TOTAL_BYTES = 20 * 1024 * 1024
# The unprivileged user the agent works as (task.toml's [agent] user, made by start.sh).
AGENT_USER = "agent"


def _templates() -> Environment:
    root = package_root() / HOST / "tasks" / "templates"
    return Environment(
        loader=FileSystemLoader(str(root)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def task_name(benchmark_id: str, model_id: str) -> str:
    """Directory name of the task for this pair."""
    return f"{benchmark_id}-{model_id}"


def _hours_text(hours: float) -> str:
    minutes = round(hours * 60)
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{hours:g} hours"


def build_spec(benchmark: BenchmarkSpec, model: BaseModelSpec, options: CompileOptions) -> TaskSpec:
    """The typed task description that the sandbox code reads as task.json."""
    gpus = options.gpus if options.gpus is not None else (0 if model.offline else 1)
    return TaskSpec(
        benchmark=benchmark.id,
        benchmark_name=benchmark.display_name,
        model=model.id,
        model_source=model.source,
        hours=options.hours,
        gpus=gpus,
        feedback=options.feedback,
        agent_eval_budget=options.agent_eval_budget,
        agent_eval_limit=options.agent_eval_limit,
        final_eval_limit=options.final_eval_limit,
        score_base_model=options.score_base_model,
        seed=options.seed,
        variant=options.variant or ("smoke" if gpus == 0 else "posttrainbench"),
    )


def _context(
    benchmark: BenchmarkSpec, model: BaseModelSpec, spec: TaskSpec, options: CompileOptions
) -> dict:
    agent_timeout = int(options.hours * 3600)
    gpu_image = load_gpu_image_pins() if spec.gpus else None
    plugin = plugins()[benchmark.id]
    prompt = render_prompt(
        model.model_id,
        plugin.prompt_name,
        hours_text(options.hours),
        gpu_line(spec.gpus, options.gpu_type or DEFAULT_GPU_TYPE, options.cpus, options.memory_gb),
        inspect=bool(plugin.posttrainbench and plugin.posttrainbench.inspect),
    )
    return {
        "layout": MODEL_LAYOUT,  # every path of the task's environment
        "posttrainbench_prompt": prompt,
        "spec": spec,
        "benchmark": benchmark,
        "model": model,
        "version": posttrainbench.__version__,
        "hours_text": _hours_text(options.hours),
        "feedback_text": FEEDBACK_TEXT[spec.feedback],
        "budget_seconds": agent_timeout,
        "agent_timeout_sec": agent_timeout,
        "verifier_timeout_sec": int(options.verifier_timeout_min * 60),
        # test.sh's outer limit on the verify process (evaluation.watchdog)
        "verify_outer_timeout_sec": int(options.verifier_timeout_min * 60) - OUTER_RESERVE_S,
        "collect_timeout_sec": 1800,
        "build_timeout_sec": 7200 if spec.gpus else 3600,  # a cold GPU image pulls ~10 GB of wheels
        "cpus": options.cpus,
        "memory_mb": options.memory_gb * 1024,
        "storage_mb": options.storage_gb * 1024,
        "gpu_image": gpu_image,
        "agent_clis_package_json": agent_clis_package_json(gpu_image),
        "model_from": options.model_from,
        "default_base_image": options.base_image
        or (gpu_image.base_image if gpu_image else DEFAULT_CPU_BASE_IMAGE),
        "gpu_types": [options.gpu_type or DEFAULT_GPU_TYPE] if spec.gpus else [],
        "solution_module": SOLUTION_MODULES.get(benchmark.id),
        "judge_env": tuple(
            dict.fromkeys(
                (*JUDGE_ENV, *INTEGRITY_ENV, *AGENTIC_JUDGE_ENV)
                if benchmark.llm_judge
                else AGENTIC_JUDGE_ENV
            )
        ),
        "solution_steps": options.solution_steps,
        "solution_max_minutes": round(options.hours * 60 * SOLUTION_TIME_SHARE, 2),
        "snapshot_max_file_bytes": SNAPSHOT_MAX_FILE_BYTES,
        "snapshot_max_total_bytes": SNAPSHOT_MAX_TOTAL_BYTES,
        "agent_user": AGENT_USER,
        "assembly_gap_s": ASSEMBLY_GAP_S,
        "final_model_size_factor": options.final_model_size_factor,
        "judge_limits_file": LIMITS_FILE_NAME,
    }


def _copy_payload(lib: Path) -> None:
    """Copy the model task's zones into `lib/posttrainbench/`."""
    copy_zones(lib, MODEL_TASK_ZONES, ignore=_payload_ignore)


def _payload_ignore(directory: str, names: list[str]) -> set[str]:
    """What no task gets: caches, tests, and a benchmark's ``data/`` (the files its source
    prepares on the host: HealthBench's is its test set, which a dev-mode agent must not
    see; the verifier reads its own sealed copy in ``tests/data/``)."""
    skip = {n for n in names if n == "tests"}
    if Path(directory).parent.name == "benchmarks" and "data" in names:
        skip.add("data")
    return skip


def _copy_tokenizer(dest: Path) -> None:
    """Ship cl100k_base with the task: sandboxes have no network for tiktoken's download."""
    source = cl100k_file()
    if source is None:
        raise PtbError(
            "the cl100k_base tokenizer file is not available offline (install litellm, "
            "or set PTB_TIKTOKEN_DIR to a directory holding it)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest / source.name)


def _write_data(out: Path, spec: TaskSpec, cache_dir: Path | None, offline: bool) -> None:
    """The sealed test set for the verifier; the feedback split (if any) for the agent."""
    try:
        prepare_benchmark(spec.benchmark, cache_dir, offline=offline)
    except DataPrepareError as exc:
        raise PtbError(f"{exc} (run `ptb data prepare` where the source is reachable)") from None
    final_test, agent_split = task_splits(spec.benchmark, spec.feedback, cache_dir)
    write_split(out / "tests" / "data" / spec.benchmark / "test.jsonl", final_test)
    if agent_split is not None:
        name = "test" if spec.feedback == "test" else "dev"
        split_path = out / "environment" / "ptb" / "data" / spec.benchmark / f"{name}.jsonl"
        write_split(split_path, agent_split)
        if spec.feedback == "test":
            # The agent already sees the test set here; give its contamination checker
            # the same items in PostTrainBench's TEST.json format.
            write_reference(
                reference_from_split(spec.benchmark, split_path),
                out / "environment" / "ptb" / "data" / AGENT_REFERENCE_NAME,
            )


@dataclass(frozen=True)
class TaskRequirements:
    """What the task's Python environment is installed from."""

    venv: str
    """requirements.txt: the venv, the same for every benchmark on a stack"""
    nodeps: str | None
    """requirements-nodeps.txt (installed with --no-deps), None when there is none"""
    judge: str | None
    """requirements-judge.txt, the LLM judge's client (its own layer above the venv), None
    for a benchmark without a judge"""


def _requirements(spec: TaskSpec, llm_judge: bool) -> TaskRequirements:
    """The task venv's requirements, its --no-deps ones, and the judge client's."""
    evaluation = package_root() / TASK / "evaluation"
    requirements = (evaluation / "requirements.txt").read_text()
    if spec.gpus:  # the GPU image's pins replace the CPU-tested versions of the same packages
        requirements = gpu_requirements(requirements)
    nodeps = evaluation / "requirements-nodeps.txt"
    # The judge's requirements stay out of requirements.txt: judged and plain tasks then
    # share the venv, and the judge layer adds only what it lacks (build_judge.sh).
    judge = (evaluation / "requirements-judge.txt").read_text() if llm_judge else None
    return TaskRequirements(requirements, nodeps.read_text() if nodeps.exists() else None, judge)


def _write_environment_files(
    out: Path, spec: TaskSpec, requirements: TaskRequirements, layers: LayerManifest
) -> None:
    (out / "environment" / "requirements.txt").write_text(requirements.venv)
    if requirements.nodeps is not None:
        (out / "environment" / "ptb" / "requirements-nodeps.txt").write_text(requirements.nodeps)
    if requirements.judge is not None:
        (out / "environment" / JUDGE_REQUIREMENTS).write_text(requirements.judge)
        build_judge = out / "environment" / JUDGE_BUILD
        template = (
            package_root()
            / HOST
            / "tasks"
            / "templates"
            / "environment"
            / "ptb"
            / "_build_judge.sh"
        )
        shutil.copyfile(template, build_judge)
        build_judge.chmod(0o755)
    chat_templates = package_root() / TASK / "evaluation" / "templates"
    workspace_templates = out / "environment" / "workspace" / "templates"
    if chat_templates.is_dir():
        shutil.copytree(chat_templates, workspace_templates)
    else:
        workspace_templates.mkdir(parents=True)
    task_context = out / "environment" / "workspace" / "task_context"
    task_context.mkdir(parents=True)
    (task_context / "README.md").write_text(plugins()[spec.benchmark].context_text() + "\n")
    _copy_payload(out / "environment" / "ptb" / "lib")
    _copy_payload(out / "tests" / "lib")
    _copy_tokenizer(out / "environment" / "ptb" / "tiktoken")
    spec.dump(out / "environment" / "ptb" / "task.json")
    spec.dump(out / "tests" / "task.json")
    layers.dump(out / "environment" / MANIFEST_PATH)


def compile_task(
    benchmark_id: str,
    model_id: str,
    out_dir: Path,
    options: CompileOptions,
    cache_dir: Path | None = None,
    offline: bool = False,
) -> Path:
    """Write the Harbor task for (benchmark, model) into `out_dir/<name>`; return its path.

    The benchmark's data comes from the prepared-data cache (fetched first if missing,
    unless *offline*).
    """
    benchmark = get_benchmark(benchmark_id)
    model = get_model(model_id)
    spec = build_spec(benchmark, model, options)
    final = out_dir / task_name(benchmark.id, model.id)
    requirements = _requirements(spec, benchmark.llm_judge)
    layers = model_task_layers(
        spec, requirements.venv, requirements.nodeps, judged=requirements.judge is not None
    )
    context = {**_context(benchmark, model, spec, options), "ptb_layers": dockerfile_steps(layers)}
    with staged_output(out_dir, final.name) as staging:
        render_tree(_templates(), package_root() / HOST / "tasks" / "templates", context, staging)
        _write_environment_files(staging, spec, requirements, layers)
        _write_data(staging, spec, cache_dir, offline)
        stamp_version(staging / "tests", spec, posttrainbench.__version__)
    return final
