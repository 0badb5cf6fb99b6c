"""Integrity of a score: contamination checks, trace parsing, judges, secret handling.

Runs on the host and inside task sandboxes (the verifier runs the judges, the agent's
workspace has the contamination checker), so imports here are stdlib + pydantic at
module level; heavier libraries are imported lazily where they are used.
"""
