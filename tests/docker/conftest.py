"""Fixtures of the docker tier: they skip a test when the machine cannot run it."""

from __future__ import annotations

import pytest

from tests.docker.engine import agent_task_skip_reason, engine_skip_reason


@pytest.fixture(scope="module")
def docker_ready() -> None:
    reason = engine_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def agent_task_ready(docker_ready: None) -> None:
    """The engine plus a base image that builds agent tasks (git, service requirements)."""
    reason = agent_task_skip_reason()
    if reason:
        pytest.skip(reason)
