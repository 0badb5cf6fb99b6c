"""A re-score trial's link to the run whose stored model it scored again.

`ptb rescore` runs the current verifier on a stored final_model through a real Harbor
trial whose agent only puts the stored files back (posttrainbench.host.rescore.replay_agent).
The trial's config carries the original run's identity, so exporting it gives a record of
the original agent's run at the new task version, linked by ``rescore_of``; the agent's
cost and time stay the original's, and the original record is kept beside it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from posttrainbench.host.results.record import ResultRecord, TimeUsed, Usage

REPLAY_AGENT_NAME = "ptb-rescore"
ORIGIN_KWARG = "origin"


class RescoreOrigin(BaseModel):
    """What a re-score record keeps of the original run."""

    model_config = ConfigDict(extra="forbid")

    id: str
    agent: str
    agent_version: str | None = None
    agent_model: str | None = None
    hours: float | None = None
    feedback: str | None = None
    task_version: str | None = None
    usage: Usage
    time: TimeUsed

    @classmethod
    def of(cls, record: ResultRecord) -> RescoreOrigin:
        """The origin fields of a stored record."""
        return cls.model_validate(record.model_dump(include=set(cls.model_fields)))

    def apply(self, rescored: ResultRecord) -> ResultRecord:
        """The re-score trial's record as a record of the original agent's run."""
        fields = self.model_dump(exclude={"id", "task_version", "usage", "time"})
        return rescored.model_copy(
            update={**fields, "usage": self.usage, "time": self.time, "rescore_of": self.id}
        )


def origin_of(agent_kwargs: dict[str, Any]) -> RescoreOrigin | None:
    """The origin a re-score trial's agent was given, or None when it is missing or invalid."""
    try:
        return RescoreOrigin.model_validate(agent_kwargs.get(ORIGIN_KWARG))
    except ValidationError:
        return None
