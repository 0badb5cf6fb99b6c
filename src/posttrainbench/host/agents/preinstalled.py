"""Harbor installed agents that use a CLI already in the environment, when it is there.

Harbor 0.26's Claude Code, Codex and OpenCode agents skip their download when the pinned
CLI is already installed; its Gemini CLI agent always installs Node.js through nvm and the
CLI from the registry, which a sandbox without the internet cannot do. This subclass checks
first, like the others, and installs only when the CLI is missing. Harbor also runs it
with plain text output, which says nothing of its tool calls; this one asks for JSON lines.
"""

from __future__ import annotations

from harbor.agents.installed.gemini_cli import GeminiCli
from harbor.environments.base import BaseEnvironment


class PreinstalledGeminiCli(GeminiCli):
    """Gemini CLI that uses the environment's own `gemini` at the pinned version, and
    writes its stream as JSON lines (tool calls, results, token counts) rather than
    plain text, so `agent/gemini-cli.txt` is a trace the parsers and judges can read."""

    def build_cli_flags(self) -> str:
        """Harbor's flags plus ``--output-format stream-json``."""
        return f"{super().build_cli_flags()} --output-format stream-json".strip()

    async def install(self, environment: BaseEnvironment) -> None:
        """Skip the nvm + npm install when the pinned version is already on PATH."""
        if await self.is_requested_version_installed(environment):
            self.logger.debug("Gemini CLI is already available at the requested version")
            return
        await super().install(environment)


IMPORT_PATHS: dict[str, str] = {
    "gemini-cli": "posttrainbench.host.agents.preinstalled:PreinstalledGeminiCli",
}
"""Harbor agent name -> the class run in its place (same name, traces and settings)."""
