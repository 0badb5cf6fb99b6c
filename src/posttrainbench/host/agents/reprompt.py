"""A Harbor agent that runs another agent again while enough of the time budget is left.

Use it as `posttrainbench.host.agents.reprompt:RepromptingAgent` with the kwargs
`inner` (a Harbor agent name such as `claude-code`, or `module:Class`),
`min_remaining_minutes` (default 30), `max_reprompts` (default 10) and, for tasks
without a PostTrainBench clock, `budget_minutes`. Every other kwarg, the model name
and the environment overlay go to the inner agent, built once by Harbor's
AgentFactory and set up once.

After each round the wrapper reads the time left in the sandbox (see
:mod:`posttrainbench.host.agents.time_budget`), decides (see
:mod:`posttrainbench.host.agents.reprompt_policy`), appends a line to `reprompt.jsonl`
in the agent's logs dir, and copies the agent's stream files (`*.txt`, which the
installed agents overwrite on every run) to `reprompt/round-N/` in the sandbox's
logs dir. A continuation resumes the inner agent's own session when it can
(Harbor's `resume`, e.g. `claude --continue`); otherwise it runs the agent afresh
with the original instruction included in the prompt.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.agents.factory import AgentFactory
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.agent.name import AgentName
from harbor.models.trial.config import AgentConfig
from harbor.models.trial.result import AgentInfo
from pydantic import ValidationError

from posttrainbench.core.errors import PtbError
from posttrainbench.host.agents.preinstalled import IMPORT_PATHS as PREINSTALLED
from posttrainbench.host.agents.reprompt_policy import (
    RepromptSettings,
    RoundRecord,
    StopReason,
    append_record,
    decide,
)
from posttrainbench.host.agents.templates import render
from posttrainbench.host.agents.time_budget import TimeLeft, TimeSource, format_duration, time_left
from posttrainbench.host.agents.usage import add_usage, has_usage, round_usage

LOG_FILE = "reprompt.jsonl"
ROUNDS_DIR = "reprompt"
NAME_SUFFIX = "+reprompt"


class RepromptConfigError(PtbError):
    """The re-prompting wrapper's kwargs are invalid (unknown inner agent, bad numbers)."""


def split_kwargs(kwargs: Mapping[str, Any]) -> tuple[RepromptSettings, dict[str, Any]]:
    """The wrapper's own settings, and the kwargs that belong to the inner agent."""
    own = {key: kwargs[key] for key in RepromptSettings.model_fields if key in kwargs}
    rest = {key: value for key, value in kwargs.items() if key not in own}
    if "inner" not in own:
        raise RepromptConfigError(
            "the re-prompting agent needs the kwarg `inner` (e.g. inner=claude-code)"
        )
    try:
        return RepromptSettings.model_validate(own), rest
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise RepromptConfigError(f"invalid re-prompt settings: {problems}") from None


def inner_agent_class(inner: str) -> type[BaseAgent]:
    """The class of the inner agent; the wrapper itself is refused (no double wrapping)."""
    try:
        cls = AgentFactory.get_agent_class_from_config(AgentConfig(name=inner))
    except Exception as exc:  # Harbor raises ValueError, ImportError or AttributeError here
        raise RepromptConfigError(f"unknown inner agent {inner!r}: {exc}") from None
    if issubclass(cls, RepromptingAgent):
        raise RepromptConfigError(
            f"inner agent {inner!r} is the re-prompting wrapper itself; wrap a real agent"
        )
    return cls


def _build_inner(inner: str, logs_dir: Path, model_name: str | None, **kwargs: Any) -> BaseAgent:
    inner_agent_class(inner)  # refuses the wrapper and unknown names with one clear error
    if inner in PREINSTALLED:
        return AgentFactory.create_agent_from_import_path(
            PREINSTALLED[inner], logs_dir=logs_dir, model_name=model_name, **kwargs
        )
    if inner in AgentName.values():
        return AgentFactory.create_agent_from_name(
            AgentName(inner), logs_dir=logs_dir, model_name=model_name, **kwargs
        )
    return AgentFactory.create_agent_from_import_path(
        inner, logs_dir=logs_dir, model_name=model_name, **kwargs
    )


def _now() -> datetime:
    return datetime.now(UTC)


class RepromptingAgent(BaseAgent):
    """Runs an inner Harbor agent, then continues it while enough time is left."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        logger: logging.Logger | None = None,
        mcp_servers: list | None = None,
        skills_dir: str | None = None,
        *,
        extra_env: dict[str, str] | None = None,
        skip_model_parsing: bool = False,
        environment_logs_dir: PurePosixPath | None = None,
        clock: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ) -> None:
        settings, inner_kwargs = split_kwargs(kwargs)
        super().__init__(
            logs_dir,
            model_name=model_name,
            logger=logger,
            mcp_servers=mcp_servers,
            skills_dir=skills_dir,
            extra_env=extra_env,
            skip_model_parsing=skip_model_parsing,
            environment_logs_dir=environment_logs_dir,
        )
        self.settings = settings
        self._clock = clock
        self._inner = _build_inner(
            settings.inner,
            logs_dir,
            model_name,
            logger=logger,
            mcp_servers=mcp_servers,
            skills_dir=skills_dir,
            extra_env=extra_env,
            skip_model_parsing=skip_model_parsing,
            environment_logs_dir=environment_logs_dir,
            **inner_kwargs,
        )
        # The trial checks capabilities (skills, MCP, Windows) on this object: answer for
        # the inner agent, but not for session resume/load, which the wrapper does not offer.
        self.capabilities = self._inner.capabilities.model_copy(
            update={
                "resume": False,
                "load_native_trajectory": False,
                "load_atif_trajectory": False,
                "handoff": False,
                "bridges": frozenset(),
            }
        )
        self._summary: dict[str, Any] | None = None

    @property
    def inner(self) -> BaseAgent:
        """The wrapped agent."""
        return self._inner

    @property
    def log_path(self) -> Path:
        """The JSON-lines log of the rounds, on the host."""
        return self.logs_dir / LOG_FILE

    @staticmethod
    def name() -> str:
        return "ptb-reprompt"

    def version(self) -> str | None:
        return self._inner.version()

    def to_agent_info(self) -> AgentInfo:
        """The inner agent's info, its name marked as re-prompted (e.g. claude-code+reprompt)."""
        info = self._inner.to_agent_info()
        return info.model_copy(update={"name": f"{info.name}{NAME_SUFFIX}"})

    @property
    def extra_env(self) -> dict[str, str]:
        # The trial overlays this on every exec of the agent phase: the inner agent's view.
        return self._inner.extra_env

    @classmethod
    def preflight(
        cls, kwargs: dict[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        """Check the wrapper's settings, then the inner agent's own preflight."""
        settings, inner_kwargs = split_kwargs(kwargs or {})
        inner_agent_class(settings.inner).preflight(kwargs=inner_kwargs, env=env)

    @classmethod
    def resolve_model_connection_config(cls, model_name, resolve_env, **options):
        """The inner agent's model connection (Harbor's preflight resolves it from the config)."""
        kwargs = dict(options.get("kwargs") or {})
        if "inner" not in kwargs:
            return super().resolve_model_connection_config(model_name, resolve_env, **options)
        settings, inner_kwargs = split_kwargs(kwargs)
        return inner_agent_class(settings.inner).resolve_model_connection_config(
            model_name, resolve_env, **{**options, "kwargs": inner_kwargs}
        )

    async def set_web_tools_disabled(self, disabled: bool, environment: BaseEnvironment) -> None:
        await self._inner.set_web_tools_disabled(disabled, environment)

    async def setup(self, environment: BaseEnvironment) -> None:
        """Set the inner agent up once; every round reuses the installation."""
        self._inner.session_id = self.session_id
        self._inner.context_id = self.context_id
        await self._inner.setup(environment)

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        """Round 1 with the instruction; then continuations while the policy allows."""
        started = self._clock()
        total = AgentContext()
        reported = False
        reprompts = 0
        prompt, resumed = instruction, False
        while True:
            round_no = reprompts + 1
            round_context = AgentContext()
            began = _now()
            try:
                if resumed:
                    await self._inner.resume(prompt, environment, round_context)
                else:
                    await self._inner.run(prompt, environment, round_context)
            except BaseException as exc:
                reason = (
                    StopReason.INNER_ERROR if isinstance(exc, Exception) else StopReason.CANCELLED
                )
                self._log_round(
                    round_no,
                    resumed,
                    began,
                    None,
                    reprompts,
                    None,
                    reason,
                    round_context,
                    error=type(exc).__name__,
                )
                if has_usage(round_context) or reported:
                    add_usage(total, round_context)
                    self._publish(context, total, round_no, reprompts, reason)
                else:
                    self._summary = self._summary_of(round_no, reprompts, reason)
                if isinstance(exc, Exception):
                    await self._snapshot_streams(environment, round_no)
                raise
            await self._snapshot_streams(environment, round_no)
            if has_usage(round_context):
                reported = True
                add_usage(total, round_context)
            left = await time_left(
                environment, self.settings.budget_minutes, self._clock() - started
            )
            decision = decide(self.settings, reprompts, left)
            self._log_round(
                round_no,
                resumed,
                began,
                left,
                reprompts,
                decision.reprompt,
                decision.reason,
                round_context,
            )
            if reported:
                # Fill Harbor's context as we go: a timeout may cancel a later round.
                self._publish(context, total, round_no, reprompts, decision.reason)
            else:
                self._summary = self._summary_of(round_no, reprompts, decision.reason)
            if not decision.reprompt:
                return
            reprompts += 1
            resumed = bool(self._inner.capabilities.resume)
            prompt = self._continuation(instruction, left, reprompts, resumed)

    def populate_context_post_run(self, context: AgentContext) -> None:
        """No round reported usage itself: let the inner agent parse its logs (its session
        spans every resumed round), then add the re-prompt summary."""
        if context.is_empty():
            self._inner.populate_context_post_run(context)
        if self._summary is not None:
            context.metadata = {**(context.metadata or {}), **self._summary}

    def _continuation(
        self, instruction: str, left: TimeLeft, reprompt_number: int, resumed: bool
    ) -> str:
        return (
            render(
                "continue.md.j2",
                time_left_text=format_duration(left.seconds or 0.0),
                time_source=left.source.value,
                reprompt_number=reprompt_number,
                max_reprompts=self.settings.max_reprompts,
                include_instruction=not resumed,
                instruction=instruction.rstrip(),
            ).strip()
            + "\n"
        )

    def _summary_of(self, rounds: int, reprompts: int, reason: StopReason | None) -> dict[str, Any]:
        return {
            "reprompt": {
                "inner_agent": self.settings.inner,
                "rounds": rounds,
                "reprompts": reprompts,
                "stop_reason": reason.value if reason else None,
                "log": LOG_FILE,
            }
        }

    def _publish(
        self,
        context: AgentContext,
        total: AgentContext,
        rounds: int,
        reprompts: int,
        reason: StopReason | None,
    ) -> None:
        self._summary = self._summary_of(rounds, reprompts, reason)
        for name in (
            "n_input_tokens",
            "n_cache_tokens",
            "n_output_tokens",
            "cost_usd",
            "model_usage",
            "rollout_details",
        ):
            setattr(context, name, getattr(total, name))
        context.metadata = {**(context.metadata or {}), **self._summary}

    def _log_round(
        self,
        round_no: int,
        resumed: bool,
        began: datetime,
        left: TimeLeft | None,
        reprompts: int,
        again: bool | None,
        reason: StopReason | None,
        round_context: AgentContext,
        error: str | None = None,
    ) -> None:
        finished = _now()
        record = RoundRecord(
            round=round_no,
            inner_agent=self.settings.inner,
            prompt="instruction" if round_no == 1 else "continuation",
            resumed_session=resumed,
            started_at=began,
            finished_at=finished,
            duration_sec=max((finished - began).total_seconds(), 0.0),
            time_left_minutes=left.minutes if left else None,
            time_source=left.source if left else TimeSource.UNKNOWN,
            time_detail=left.detail if left else None,
            min_remaining_minutes=self.settings.min_remaining_minutes,
            reprompts_done=reprompts,
            max_reprompts=self.settings.max_reprompts,
            action="reprompt" if again else "stop",
            stop_reason=reason,
            error=error,
            usage=round_usage(round_context),
        )
        append_record(self.log_path, record)
        if again:
            self.logger.info(
                f"reprompt: round {round_no} ended with {left.minutes:.1f} min left; continuing"
            )
        else:
            extra = f" ({record.time_detail})" if record.time_detail else ""
            self.logger.info(f"reprompt: round {round_no} ended; not re-prompting: {reason}{extra}")

    async def _snapshot_streams(self, environment: BaseEnvironment, round_no: int) -> None:
        # Installed agents overwrite their stream file (claude-code.txt, ...) on every run;
        # keep each round's copy for the judges. Best effort: a failed copy loses no result.
        logs = PurePosixPath(self.environment_logs_dir)
        command = render(
            "snapshot_round.sh.j2",
            logs_dir=shlex.quote(logs.as_posix()),
            round_dir=shlex.quote((logs / ROUNDS_DIR / f"round-{round_no}").as_posix()),
        ).strip()
        try:
            await environment.exec(command, timeout_sec=60)
        except Exception as exc:
            self.logger.debug(f"reprompt: could not keep round {round_no}'s streams: {exc}")
