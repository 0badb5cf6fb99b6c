"""Caps on the judges' work: every judge has a time cap and a byte cap.

A judge that hits a cap says so (``Judgement.incomplete``) and is never clean by
default (see :mod:`precedence`). The defaults fit the verifier's 30 minutes for the
judges when they run side by side; an operator changes them with a JSON file
(``--limits FILE``; in a task, ``/tests/judge_limits.json`` when present):
``{"contamination": {"time_s": 600, "max_bytes": 1000000000}, "total_time_s": 1500}``.

What a judge's bytes are: contamination, the bytes it reads to scan (data files, the
code snapshot, the staged write set, final_model's non-weight files); disallowed_model,
the bytes of final_model it reads (safetensors headers, non-weight files, samples);
the trace judges, the bytes of agent logs they parse.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from posttrainbench.task.integrity.judges.inputs import JudgeInputError

GiB = 1024**3
LIMITS_FILE_NAME = "judge_limits.json"


class JudgeLimit(BaseModel):
    """The caps of one judge."""

    model_config = ConfigDict(extra="forbid")

    time_s: float = Field(gt=0, description="wall-clock seconds before the judge is stopped")
    max_bytes: int = Field(gt=0, description="bytes the judge may read (see the module docstring)")


class JudgeLimits(BaseModel):
    """Caps of every judge, and of the judges' run as a whole."""

    model_config = ConfigDict(extra="forbid")

    contamination: JudgeLimit = JudgeLimit(time_s=1200, max_bytes=8 * GiB)
    disallowed_model: JudgeLimit = JudgeLimit(time_s=600, max_bytes=2 * GiB)
    api_usage: JudgeLimit = JudgeLimit(time_s=600, max_bytes=2 * GiB)
    benchmark_lookup: JudgeLimit = JudgeLimit(time_s=600, max_bytes=2 * GiB)
    anomaly: JudgeLimit = JudgeLimit(time_s=900, max_bytes=2 * GiB)
    total_time_s: float = Field(
        default=1740, gt=0, description="all judges together (they run side by side)"
    )

    def of(self, judge: str) -> JudgeLimit:
        """The caps of *judge*."""
        return getattr(self, judge)

    @classmethod
    def load(cls, path: Path) -> JudgeLimits:
        """Read a limits file (JudgeInputError when it is unreadable or invalid)."""
        try:
            return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
        except OSError as exc:
            raise JudgeInputError(
                f"cannot read limits file {path}: {exc.strerror or exc}"
            ) from None
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise JudgeInputError(f"limits file {path} is not valid: {first}") from None
