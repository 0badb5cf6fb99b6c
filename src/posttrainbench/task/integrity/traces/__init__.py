"""Agent traces (Claude Code, Codex, Gemini CLI, OpenCode, Harbor) as one event list."""
