"""PostTrainBench's verdict files: each judge's ``judgement.json``, read strictly, and
their aggregate ``judge_result.json`` (its ``aggregate_judgement.py``).

A judge that failed, timed out or wrote no valid ``judgement.json`` is *undecided*
(``None``), never clean. PostTrainBench's aggregation fails loudly then (no
``judge_result.json`` at all); ours writes the aggregate with ``null`` for what is
undecided, so that a reader sees which judge failed, and the report never counts it clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from posttrainbench.core.atomic_write import write_text_atomic

# The reserved judge name of aggregate_judgement.py.
API_JUDGE = "api"
JUDGEMENT_NAME = "judgement.json"
RESULT_FILE = "judge_result.json"
STATUS_FILE = "ptb_judges.json"
MAX_JUDGEMENT_BYTES = 256 * 1024


class ContaminationJudgement(BaseModel):
    """``judgement.json`` of a contamination / base-model judge (prompt.txt's four fields)."""

    model_config = ConfigDict(extra="forbid")

    contamination: StrictBool
    disallowed_model: StrictBool
    justification_contamination: StrictStr
    justification_disallowed_model: StrictStr


class ApiJudgement(BaseModel):
    """``judgement.json`` of the third-party API judge (prompt_api_judge.md's two fields)."""

    model_config = ConfigDict(extra="forbid")

    disallowed_api_usage: StrictBool
    justification_disallowed_api_usage: StrictStr


def parse_judgement(
    raw: bytes, kind: Literal["data_and_model", "api"]
) -> ContaminationJudgement | ApiJudgement:
    """The verdict in *raw*; ValueError (one line) when it is not exactly the prompt's
    fields (the prompt says "exactly these fields", so anything else is not a verdict)."""
    if len(raw) > MAX_JUDGEMENT_BYTES:
        raise ValueError(f"judgement.json is over {MAX_JUDGEMENT_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"judgement.json is not valid JSON: {exc}") from None
    model = ContaminationJudgement if kind == "data_and_model" else ApiJudgement
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"judgement.json: {where}: {first['msg']}") from None


class JudgeRun(BaseModel):
    """What one agentic judge did: its verdict, or why it has none."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="PostTrainBench's judge name: 'gpt5_4', 'kimi', 'api'")
    cli: str
    model: str
    kind: Literal["data_and_model", "api"]
    status: Literal["decided", "undecided"]
    reason: str | None = Field(default=None, description="why undecided")
    seconds: float | None = None
    judgement: ContaminationJudgement | ApiJudgement | None = None

    def flagged(self) -> bool | None:
        """True when it flags anything, False when it clears everything, None undecided."""
        j = self.judgement
        if j is None:
            return None
        if isinstance(j, ApiJudgement):
            return j.disallowed_api_usage
        return j.contamination or j.disallowed_model


class JudgeResult(BaseModel):
    """``judge_result.json``: aggregate_judgement.py's fields; ``None`` = undecided."""

    model_config = ConfigDict(extra="forbid")

    contamination: bool | None
    disallowed_model: bool | None
    justification_contamination: str
    justification_disallowed_model: str
    disallowed_api_usage: bool | None = None
    justification_disallowed_api_usage: str | None = None


def _any_of(values: list[bool | None]) -> bool | None:
    # Either judge flags -> flagged; clean only when every judge decided clean.
    if any(v is True for v in values):
        return True
    if values and all(v is False for v in values):
        return False
    return None


def aggregate(runs: list[JudgeRun]) -> JudgeResult:
    """aggregate_judgement.py's ``aggregate``: the contamination judges OR'd (each
    justification tagged ``[name]``), the API judge's verdict kept as it is."""
    contam = [r for r in runs if r.kind == "data_and_model"]
    api = next((r for r in runs if r.kind == "api"), None)

    def field(run: JudgeRun, name: str) -> bool | None:
        return getattr(run.judgement, name) if run.judgement is not None else None

    def collect(name: str) -> str:
        return "\n\n".join(
            f"[{r.name}] "
            + (
                getattr(r.judgement, name)
                if r.judgement is not None
                else f"(undecided: {r.reason})"
            )
            for r in contam
        )

    result = JudgeResult(
        contamination=_any_of([field(r, "contamination") for r in contam]),
        disallowed_model=_any_of([field(r, "disallowed_model") for r in contam]),
        justification_contamination=collect("justification_contamination"),
        justification_disallowed_model=collect("justification_disallowed_model"),
    )
    if api is not None:
        if isinstance(api.judgement, ApiJudgement):
            result.disallowed_api_usage = api.judgement.disallowed_api_usage
            result.justification_disallowed_api_usage = (
                api.judgement.justification_disallowed_api_usage
            )
        else:
            result.justification_disallowed_api_usage = f"(undecided: {api.reason})"
    return result


class AgenticStatus(BaseModel):
    """``ptb_judges.json``: whether PostTrainBench's judges ran, and each one's outcome."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["skipped", "ran"]
    reason: str | None = None
    judges: list[JudgeRun] = Field(default_factory=list)
    result: JudgeResult | None = None

    def write(self, out_dir: Path) -> Path:
        """Write atomically into *out_dir*."""
        return write_text_atomic(out_dir / STATUS_FILE, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> AgenticStatus:
        """Read and validate a status file."""
        return cls.model_validate_json(path.read_text(encoding="utf-8"))


def judgement_file(name: str) -> str:
    """PostTrainBench's per-judge file name: ``judgement_<name>.json``."""
    return f"judgement_{name}.json"


def write_verdict_files(out_dir: Path, runs: list[JudgeRun]) -> JudgeResult | None:
    """Each decided judge's ``judgement_<name>.json`` (its JSON as the judge wrote it,
    validated) and ``judge_result.json`` when a contamination judge ran."""
    for run in runs:
        path = out_dir / judgement_file(run.name)
        if run.judgement is not None:
            write_text_atomic(path, json.dumps(run.judgement.model_dump(), indent=2) + "\n")
        elif path.exists() or path.is_symlink():
            path.unlink()  # a stale or planted file never stands as this run's verdict
    if not any(r.kind == "data_and_model" for r in runs):
        return None
    result = aggregate(runs)
    write_text_atomic(out_dir / RESULT_FILE, result.model_dump_json(indent=2) + "\n")
    return result
