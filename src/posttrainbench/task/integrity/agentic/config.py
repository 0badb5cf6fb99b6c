"""Whether PostTrainBench's agentic judges run, and against which model: opt-in.

They run only when the verifier's environment names a judge model and its key (the
task's ``[verifier.env]``, taken from the host when the run starts; never written into
the task dir). Without them the verifier writes ``ptb_judges.json`` with
``"status": "skipped"`` and nothing else changes.

- ``PTB_AGENTIC_JUDGE_MODEL``: the model of the Codex judges (PostTrainBench: ``gpt-5.4``);
  setting it turns the judges on;
- ``PTB_AGENTIC_JUDGE_SECOND_MODEL``: OpenCode's ``provider/model`` for the second
  contamination vote (PostTrainBench: ``opencode/kimi-k2.6``); unset, one vote;
- ``PTB_AGENTIC_JUDGE_API_KEY``: the key, given to the CLIs only;
- ``PTB_AGENTIC_JUDGE_BASE_URL``: the OpenAI-compatible endpoint (default
  ``https://api.openai.com/v1``); the sandbox reaches this host and port and nothing else;
- ``PTB_AGENTIC_JUDGE_TIMEOUT_S``: each judge's time cap (default 1800).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

MODEL_ENV = "PTB_AGENTIC_JUDGE_MODEL"
SECOND_MODEL_ENV = "PTB_AGENTIC_JUDGE_SECOND_MODEL"
KEY_ENV = "PTB_AGENTIC_JUDGE_API_KEY"
BASE_URL_ENV = "PTB_AGENTIC_JUDGE_BASE_URL"
TIMEOUT_ENV = "PTB_AGENTIC_JUDGE_TIMEOUT_S"
AGENTIC_ENV = (MODEL_ENV, SECOND_MODEL_ENV, KEY_ENV, BASE_URL_ENV, TIMEOUT_ENV)
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_S = 1800.0


class AgenticConfig(BaseModel):
    """The configured judges' model, endpoint and key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    second_model: str | None = None
    api_key: str = Field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)


def config_from_env(env: Mapping[str, str]) -> tuple[AgenticConfig | None, str]:
    """The configuration, or None with why the judges are skipped (or misconfigured)."""
    model = env.get(MODEL_ENV, "").strip()
    if not model:
        return None, f"skipped: not configured ({MODEL_ENV} is not set)"
    key = env.get(KEY_ENV, "").strip()
    if not key:
        return None, f"skipped: not configured ({MODEL_ENV} is set but {KEY_ENV} is not)"
    try:
        timeout = float(env.get(TIMEOUT_ENV, "").strip() or DEFAULT_TIMEOUT_S)
    except ValueError:
        return None, f"skipped: {TIMEOUT_ENV} is not a number"
    return (
        AgenticConfig(
            model=model,
            second_model=env.get(SECOND_MODEL_ENV, "").strip() or None,
            api_key=key,
            base_url=env.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL,
            timeout_s=timeout,
        ),
        "configured",
    )
