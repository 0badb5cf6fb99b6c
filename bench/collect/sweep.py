"""The synthetic sweep bench/collect exports: N real-shaped Harbor trial directories.

Agents x 7 benchmarks x 4 base models x attempts, in job directories of 500 trials, built
with Harbor's own models (tests/results_fixtures.py). Like a real sweep's, the agents'
traces vary in size (1-100 KB, log-uniform), some end mid-line (the agent was killed while
it wrote them), and some trials appear twice (a job directory copied for a backup):
those are skipped as the same trial, never stored twice.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the trial writer lives with the tests

from posttrainbench.host.catalog import list_benchmarks, list_models  # noqa: E402
from tests.results_fixtures import T0, TrialSpec, write_trial  # noqa: E402

AGENTS = [
    ("claude-code", "anthropic/claude-opus-4-1"),
    ("codex", "openai/gpt-5"),
    ("gemini-cli", "google/gemini-3-pro"),
    ("opencode", "zai/glm-4.6"),
    ("terminus-2", "openai/gpt-5-mini"),
]
TRUNCATED = 0.05  # share of traces cut mid-line
DUPLICATED = 0.02  # share of trials also present in a copied job directory
TRIALS_PER_JOB = 500


def _grow_trace(trace: Path, size: int, truncate: bool) -> None:
    """Pad a trace to about *size* bytes with assistant turns; cut it mid-line if asked."""
    text = trace.read_text()
    turn = {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "x" * 900}]},
    }
    line = json.dumps(turn) + "\n"
    body = text + line * max(0, (size - len(text)) // len(line))
    if truncate:
        body = body[: max(1, len(body) - len(line) // 2)]
    trace.write_text(body)


def write_sweep(root: Path, n: int, rng: random.Random) -> int:
    """Write *n* distinct trials under *root*; returns how many duplicate copies were added."""
    benchmarks = [b.id for b in list_benchmarks()]
    models = [m.id for m in list_models() if not m.offline]
    duplicates: list[Path] = []
    for i in range(n):
        agent, agent_model = AGENTS[i % len(AGENTS)]
        roll = rng.random()
        spec = TrialSpec(
            agent=agent,
            agent_model=agent_model,
            benchmark=benchmarks[(i // 5) % len(benchmarks)],
            model=models[(i // 35) % len(models)],
            score=round(rng.random(), 4),
            base_score=0.1,
            started=T0 + timedelta(minutes=i),
            agent_hours=rng.uniform(0.5, 10),
            error="AgentTimeoutError" if roll < 0.05 else None,
            flagged=("contamination",) if 0.05 <= roll < 0.08 else (),
            cost_usd=round(rng.uniform(1, 60), 2),
        )
        trial = write_trial(root / f"job-{i // TRIALS_PER_JOB:03d}", spec)
        size = int(1000 * 100 ** rng.random())  # 1 KB to 100 KB, log-uniform
        _grow_trace(trial / "agent" / "claude-code.txt", size, rng.random() < TRUNCATED)
        if rng.random() < DUPLICATED:
            duplicates.append(trial)
    for trial in duplicates:
        shutil.copytree(trial, root / "job-backup" / trial.name)
    return len(duplicates)
