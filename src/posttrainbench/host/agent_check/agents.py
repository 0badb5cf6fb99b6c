"""How each agent CLI is pointed at the scripted model: its key, base URL and model name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class CliWiring(BaseModel):
    """The variables that send one CLI's requests to a model endpoint."""

    model_config = ConfigDict(frozen=True)

    key_var: str
    base_url_var: str
    base_path: str = ""  # appended to the server's URL (OpenAI clients expect /v1)
    model: str  # the -m/--model the check runs with (a name the CLI accepts)


CLI_WIRING: dict[str, CliWiring] = {
    "claude-code": CliWiring(
        key_var="ANTHROPIC_API_KEY",
        base_url_var="ANTHROPIC_BASE_URL",
        model="anthropic/claude-sonnet-4-5",
    ),
    "codex": CliWiring(
        key_var="OPENAI_API_KEY",
        base_url_var="OPENAI_BASE_URL",
        base_path="/v1",
        model="openai/gpt-5",
    ),
    "gemini-cli": CliWiring(
        key_var="GEMINI_API_KEY",
        base_url_var="GOOGLE_GEMINI_BASE_URL",
        model="gemini/gemini-2.5-pro",
    ),
    "opencode": CliWiring(
        key_var="OPENAI_API_KEY",
        base_url_var="OPENAI_BASE_URL",
        base_path="/v1",
        model="openai/gpt-5",
    ),
}
CHECKABLE_AGENTS = tuple(CLI_WIRING)
