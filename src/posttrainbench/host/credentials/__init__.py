"""Credentials for agents and scrubbing of secret values from everything kept.

Host-only: never copied into a task (the import contracts in pyproject.toml check it).
"""
