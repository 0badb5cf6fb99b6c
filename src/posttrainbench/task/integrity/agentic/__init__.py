"""PostTrainBench's own agentic judges (its ``src/disallowed_usage_judge/``), run in the
verifier beside this project's deterministic judges: its prompts and tools, a real agent
CLI (Codex; OpenCode for a second vote) in a sandbox, its verdict files and aggregation."""
