"""A small results store for the report tests: three agents, a flagged, an errored and a
missing cell, a script tag in a trace and a long trace."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from posttrainbench.host.cli.results_cmd import build_leaderboard
from posttrainbench.host.results.export import export
from posttrainbench.host.results.table import Leaderboard
from tests.results_fixtures import T0, TrialSpec, write_job

EVIL_AGENT = 'evil<img src=x onerror="alert(3)">'
SCRIPT = "<script>alert(1)</script>"
IDS = {  # fixed trial ids (the first 7 characters name the trial dir), so tests can find a run
    "strong1": "a1111111-0000-4000-8000-000000000001",
    "strong2": "b1111111-0000-4000-8000-000000000002",
    "flagged": "a2222222-0000-4000-8000-000000000001",
    "errored": "b2222222-0000-4000-8000-000000000002",
    "evil": "a3333333-0000-4000-8000-000000000001",
    "long": "a4444444-0000-4000-8000-000000000001",
}


@dataclass
class Built:
    """A results store plus what the report needs."""

    results_dir: Path
    board: Leaderboard
    records: list = field(default_factory=list)


def build_results(root: Path) -> Built:
    """Three agents over gsm8k and humaneval on qwen3-1.7b (plus one smollm3-3b run):

    - claude-code: two gsm8k runs (mean ± stderr), one humaneval run; best agent;
    - codex: gsm8k flagged by the contamination judge, humaneval errored (both fall back);
    - EVIL_AGENT: one humaneval run whose trace holds a script tag; gsm8k missing;
    - a long trace (300 tool round trips) on claude-code's humaneval run.
    """
    cc = dict(agent="claude-code", agent_model="anthropic/claude-opus-4-1")
    cx = dict(agent="codex", agent_model="openai/gpt-5")
    specs = {
        "strong1": TrialSpec(**cc, score=0.6, trial_id=IDS["strong1"]),
        "strong2": TrialSpec(
            **cc,
            score=0.7,
            started=T0 + timedelta(hours=12),
            agent_hours=4.0,
            cost_usd=9.0,
            trial_id=IDS["strong2"],
        ),
        "long": TrialSpec(**cc, benchmark="humaneval", score=0.5, trial_id=IDS["long"]),
        "flagged": TrialSpec(**cx, score=0.9, flagged=("contamination",), trial_id=IDS["flagged"]),
        "errored": TrialSpec(
            **cx, benchmark="humaneval", error="AgentTimeoutError", trial_id=IDS["errored"]
        ),
        "evil": TrialSpec(
            agent=EVIL_AGENT,
            agent_model=None,
            benchmark="humaneval",
            score=0.3,
            cost_usd=None,
            trial_id=IDS["evil"],
        ),
    }
    jobs = root / "jobs"
    job = write_job(jobs, "job1", list(specs.values()))
    evil_trial = next(job.glob(f"humaneval-qwen3-1.7b__{IDS['evil'][:7]}"))
    (evil_trial / "agent" / "claude-code.txt").write_text(
        json.dumps(
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": SCRIPT}]},
            }
        )
        + "\n"
    )
    long_trial = next(job.glob(f"humaneval-qwen3-1.7b__{IDS['long'][:7]}"))
    lines = []
    for i in range(300):
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{i}",
                            "name": "Bash",
                            "input": {"command": f"echo step {i}"},
                        }
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"t{i}",
                            "content": "x" * 5000 if i == 0 else f"step {i}",
                        }
                    ],
                },
            }
        )
    (long_trial / "agent" / "claude-code.txt").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )
    results = root / "results"
    export([jobs], results)
    board, records = build_leaderboard(results, "mean", None, None)
    return Built(results, board, records)
