"""The Mode B verifier's fresh instance, on a real local sandbox: what a candidate (root in
its environment) leaves behind is gone, its outputs arrive as data at the same paths."""

from __future__ import annotations

import pytest

from posttrainbench.service.mode_b.environment_reset import (
    UnverifiableEnvironmentError,
    carried_paths,
    fresh_instance,
)
from tests.sandbox_support import MakeEnv, requires_bwrap, run

pytestmark = [requires_bwrap, pytest.mark.environment]

# As root in the environment: a preload for every process, a trojan first on the PATH, a
# daemon, a planted reward; its outputs: an answer, a link out, a deleted workspace file.
LEAVE_BEHIND = (
    "echo /tmp/forge.so > /etc/ld.so.preload; "
    "mkdir -p /opt/ptb/venv/bin && printf '#!/bin/sh\\necho forged\\n' > /opt/ptb/venv/bin/cat "
    "&& chmod 755 /opt/ptb/venv/bin/cat; "
    "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; "
    "nohup setsid sleep 600 >/dev/null 2>&1 & "
    "echo beta > /app/answer.txt; ln -s /etc/shadow /app/link; rm /app/evaluate.py; "
    "echo note > /logs/agent/note.txt"
)
LOOK = (
    "ls /etc/ld.so.preload /opt/ptb/venv/bin/cat /logs/verifier/reward.txt /app/link "
    "/app/evaluate.py 2>&1 | grep -c 'No such file'; pgrep -c sleep; "
    "/usr/bin/cat /app/answer.txt /logs/agent/note.txt; cat /app/answer.txt"
)


def test_a_fresh_instance_keeps_only_the_outputs_as_data(make_env: MakeEnv) -> None:
    env = make_env()

    async def scenario() -> tuple[list[str], list[str], str]:
        await env.start(force_build=False)
        try:
            left = await env.exec(LEAVE_BEHIND, user="root")
            assert left.return_code == 0, left.stderr
            keep = carried_paths(env)
            carried = await fresh_instance(env, keep)
            looked = await env.exec(LOOK, user="root")
            return keep, carried, looked.stdout
        finally:
            await env.stop(delete=True)

    keep, carried, seen = run(scenario())
    assert keep == ["/app", "/logs/agent", "/logs/artifacts"]
    assert carried == keep
    # 5 files gone (preload, trojan, reward, link, deleted file); only the init's sleep runs;
    # the answer and the log arrived; `cat` is the system's again (it prints no "forged").
    assert seen.split("\n") == ["5", "1", "beta", "note", "beta", ""], seen


def test_a_task_output_below_a_system_path_is_refused(make_env: MakeEnv, tmp_path) -> None:
    env = make_env()
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.toml").write_text('artifacts = ["/etc/passwd"]\n')
    env.environment_dir = task / "environment"
    with pytest.raises(UnverifiableEnvironmentError, match="/etc/passwd: a task output"):
        carried_paths(env)
