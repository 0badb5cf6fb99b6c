"""Optional LLM review of a run: the judge's prompt, the trace, the code; a majority vote.

The model is ``$PTB_INTEGRITY_JUDGE_MODEL``: an explicit opt-in (a benchmark's own
``$PTB_JUDGE_MODEL`` does not turn it on, so no run pays for reviews it did not ask
for); without it the review is skipped and the judgement says so. Calls go through litellm (imported lazily)
by way of :mod:`posttrainbench.task.benchmarks.llm_judge`, so the same clients serve here:

- ``PTB_INTEGRITY_RECORDINGS=FILE`` replays recorded replies (tests, offline
  re-judging; a request with no recording is an error, never a live call). Several
  recordings of one request are replayed in order, which is how N votes differ.
- ``PTB_INTEGRITY_RECORD_TO=FILE`` additionally records live replies in that format.

Each judge's prompt is a template file in ``templates/`` (``system.md`` plus
``<judge id>.md``), filled with the detectors' findings, the rendered trace and the
code snapshot, each cut to a character budget. The model must answer
``{"flagged": bool, "justification": str}``; an unparseable answer is a failed vote.

Votes: N requests (temperature 0 for one vote, 0.7 for several). The majority of the
valid votes decides; a tie counts as flagged, because flagged runs are the ones a
human reviews, and a split panel is a reason for that review. Use an odd N.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from string import Template

from pydantic import BaseModel, ConfigDict, Field

from posttrainbench.core.verdict import LlmVote
from posttrainbench.task.integrity.judges.actions import snapshot_code_files
from posttrainbench.task.integrity.judges.detection import Detection
from posttrainbench.task.integrity.judges.inputs import JudgeContext
from posttrainbench.task.integrity.traces.events import NormalizedTrace

MODEL_ENV = "PTB_INTEGRITY_JUDGE_MODEL"
RECORDINGS_ENV = "PTB_INTEGRITY_RECORDINGS"
RECORD_TO_ENV = "PTB_INTEGRITY_RECORD_TO"
TEMPLATES = Path(__file__).resolve().parent / "templates"
TRACE_BUDGET_CHARS = 60_000
SNAPSHOT_BUDGET_CHARS = 30_000
EVENT_CHARS = 600
FILE_EXCERPT_CHARS = 4_000
MAX_TOKENS = 800


class LlmReview(BaseModel):
    """The outcome of the LLM review of one judge."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    votes: list[LlmVote] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    skipped: str | None = Field(default=None, description="why no review ran")

    @property
    def decision(self) -> bool | None:
        """Majority of the valid votes (a tie is flagged); None without votes."""
        return majority(self.votes)


def majority(votes: list[LlmVote]) -> bool | None:
    """True when at least half of the votes flag; None for no votes."""
    if not votes:
        return None
    flagged = sum(1 for v in votes if v.flagged)
    return flagged * 2 >= len(votes)


def review_model() -> str | None:
    """The configured review model, or None."""
    return os.environ.get(MODEL_ENV, "").strip() or None


def make_client(model: str):
    """The client selected by the environment (see the module docstring)."""
    from posttrainbench.task.benchmarks.llm_judge import LitellmJudge, RecordedJudge, RecordingJudge

    recordings = os.environ.get(RECORDINGS_ENV, "").strip()
    if recordings:
        return RecordedJudge(Path(recordings), model)
    client = LitellmJudge(model)
    record_to = os.environ.get(RECORD_TO_ENV, "").strip()
    return RecordingJudge(client, Path(record_to)) if record_to else client


def render_trace(traces: list[NormalizedTrace], budget: int = TRACE_BUDGET_CHARS) -> str:
    """The traces as numbered lines; over budget, the head and the tail are kept."""
    lines: list[str] = []
    for trace in traces:
        lines.append(f"## {trace.source or 'trace'} ({trace.format}, {len(trace.events)} events)")
        for e in trace.events:
            body = (
                e.command
                or e.url
                or e.path
                or e.text
                or (json.dumps(e.tool_input) if e.tool_input else "")
            )
            label = e.kind + (f"/{e.role}" if e.role else "") + (f" {e.tool}" if e.tool else "")
            body = " ".join(str(body).split())
            if len(body) > EVENT_CHARS:
                body = body[:EVENT_CHARS] + " [...]"
            lines.append(f"[{e.index}] {label}: {body}")
    if not lines:
        return "(no agent trace was found)"
    return _head_tail(lines, budget)


def _head_tail(lines: list[str], budget: int) -> str:
    text = "\n".join(lines)
    if len(text) <= budget:
        return text
    head, tail, used = [], [], 0
    for line in lines:  # a third of the budget for the start, the rest for the end
        if used + len(line) + 1 > budget // 3:
            break
        head.append(line)
        used += len(line) + 1
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > budget:
            break
        tail.append(line)
        used += len(line) + 1
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join(head + [f"... ({omitted} lines omitted) ..."] + tail[::-1])


def render_snapshot(snapshot: Path | None, budget: int = SNAPSHOT_BUDGET_CHARS) -> str:
    """A listing of the snapshot and excerpts of its code files, within the budget."""
    if snapshot is None or not snapshot.is_dir():
        return "(no code snapshot)"
    files = snapshot_code_files(snapshot)
    listing = [f"- {p.relative_to(snapshot).as_posix()} ({p.stat().st_size} bytes)" for p in files]
    out = "Files:\n" + "\n".join(listing[:300])
    for path in files:
        if path.suffix not in (".py", ".sh", ".ipynb", ".bash", ""):
            continue
        excerpt = path.read_text(encoding="utf-8", errors="replace")[:FILE_EXCERPT_CHARS]
        block = f"\n\n### {path.relative_to(snapshot).as_posix()}\n{excerpt}"
        if len(out) + len(block) > budget:
            out += "\n\n(further files omitted)"
            break
        out += block
    return out


def render_findings(detection: Detection) -> str:
    """The detectors' evidence as a bullet list."""
    if not detection.evidence and not detection.missing:
        return "- (no findings)"
    lines = [
        f"- [{'FLAG' if e.flagged else 'note'}] {e.detector}: {e.detail}"
        + (f" ({e.location})" if e.location else "")
        for e in detection.evidence[:60]
    ]
    lines += [f"- [missing input] {m}" for m in detection.missing]
    return "\n".join(lines)


def build_messages(judge_id: str, ctx: JudgeContext, detection: Detection) -> list[dict[str, str]]:
    """The chat messages of one review request."""
    inputs = ctx.inputs
    fields = {
        "benchmark": inputs.benchmark,
        "feedback": inputs.feedback,
        "base_model": inputs.base_model_source or "the task's base model",
        "allowed_apis": ", ".join(inputs.allowed_apis) or "none",
        "findings": render_findings(detection),
        "trace": render_trace(ctx.traces if ctx.has_traces else []),
        "snapshot": render_snapshot(inputs.code_snapshot),
    }
    system = (TEMPLATES / "system.md").read_text(encoding="utf-8")
    user = Template((TEMPLATES / f"{judge_id}.md").read_text(encoding="utf-8")).safe_substitute(
        fields
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_vote(reply: str, model: str) -> LlmVote:
    """The vote in a reply: its first JSON object with a boolean "flagged"."""
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", reply.strip())
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict) and isinstance(obj.get("flagged"), bool):
            return LlmVote(
                model=model, flagged=obj["flagged"], justification=str(obj.get("justification", ""))
            )
        start = text.find("{", start + 1)
    raise ValueError(f"no JSON answer with a boolean 'flagged' in the reply: {reply[:200]!r}")


def run_review(
    judge_id: str, ctx: JudgeContext, detection: Detection, votes: int, client=None
) -> LlmReview:
    """Ask the review model *votes* times; failures are recorded, never raised."""
    if votes <= 0:
        return LlmReview(skipped="LLM review disabled (--llm-votes 0)")
    model = client.model if client is not None else review_model()
    if model is None:
        return LlmReview(skipped=f"no review model configured ({MODEL_ENV})")
    review = LlmReview(model=model)
    try:
        client = client or make_client(model)
        messages = build_messages(judge_id, ctx, detection)
    except Exception as exc:
        review.errors.append(f"{type(exc).__name__}: {exc}")
        return review
    temperature = 0.0 if votes == 1 else 0.7
    for _ in range(votes):
        try:
            reply = client.complete(messages, temperature=temperature, max_tokens=MAX_TOKENS)
            review.votes.append(parse_vote(reply, model))
        except Exception as exc:  # one failed vote does not lose the others
            review.errors.append(f"{type(exc).__name__}: {exc}")
    return review
