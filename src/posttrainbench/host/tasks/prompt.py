"""The agent's prompt: PostTrainBench's ``prompt.txt``, rendered as its ``get_prompt.py`` does.

``data/posttrainbench_prompt.txt`` is aisa-group/PostTrainBench's
``src/eval/general/prompt.txt`` unchanged (MIT; the commit is in docs/parity.md). The
placeholders are filled in get_prompt.py's order with its values: the base model's hub
id, the benchmark's ``benchmark.txt`` name, the hours as given, its GPU line, and its
inspect-ai note for the benchmarks it lists in ``INSPECT_EVALS``. The Claude clause is
always appended, as PostTrainBench's Harbor adapter does by default (a Harbor task is
compiled before its agent is chosen). The only substitution is the hardware line where
the task's hardware is not PostTrainBench's (another GPU type or count, or no GPU);
docs/parity.md lists it. What this project adds (where things are, the unprivileged
user, the final model's limits) follows in a section of its own, after the prompt.
"""

from __future__ import annotations

from pathlib import Path

PROMPT_FILE = Path(__file__).parent / "data" / "posttrainbench_prompt.txt"
# get_prompt.py's text for the INSPECT_EVALS benchmarks (its setup_other).
INSPECT_NOTE = (
    "- A final note: the evaluate.py script sometimes outputs ERROR warnings. Do not be "
    "alarmed by this, this is normal behavior for inspect-ai. Also if you run into issues "
    "with the evaluate.py script, this is likely due to memory constraints on the GPU. In "
    "this case please decrease --max-connections or --max-tokens.\n"
)
CLAUDE_CLAUSE = (
    "\nYou are running in a non-interactive mode. So make sure every process you are "
    "running finishes before you write your last message.\n"
)
PTB_GPU = "H100"


def gpu_line(gpus: int, gpu_type: str, cpus: int, memory_gb: int) -> str:
    """get_prompt.py's hardware line; the same words for another GPU type, and for none."""
    if gpus == 0:
        return f"- The machine has no GPU: {cpus} CPU cores and {memory_gb} GB of memory."
    name = PTB_GPU if gpu_type.upper().startswith(PTB_GPU) else gpu_type
    if gpus == 1:
        return f"- The machine is equipped with an Nvidia {name} GPU."
    return f"- The machine is equipped with {gpus} Nvidia {name} GPUs."


def hours_text(hours: float) -> str:
    """The hours as a user gives them to PostTrainBench (``10``, ``0.5``)."""
    return f"{hours:g}"


def render_prompt(model: str, benchmark: str, hours: str, gpu_info: str, inspect: bool) -> str:
    """What get_prompt.py prints for these values (``--agent claude``), newline included."""
    result = PROMPT_FILE.read_text(encoding="utf-8")
    result = result.replace("{model}", model)
    result = result.replace("{benchmark}", benchmark)
    result = result.replace("{num_hours}", hours)
    result = result.replace("{gpu_info}", gpu_info)
    result = result.replace("{setup_other}", INSPECT_NOTE if inspect else "")
    return result + CLAUDE_CLAUSE + "\n"
