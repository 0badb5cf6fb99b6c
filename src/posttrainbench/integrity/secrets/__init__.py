"""Credentials for agents and scrubbing of secret values from everything kept."""
