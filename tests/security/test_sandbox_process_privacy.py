"""The agent cannot watch another user's processes in the local sandbox.

An agent task's candidate runs under its own uid while the agent works; with a plain
``/proc`` the agent could read the candidate's command line, environment and counters
(and so learn an aggregate-only split's items as the candidate handles them). The
sandbox's ``/proc`` is mounted ``hidepid=invisible,gid=0``: an unprivileged user sees
only its own processes, while root (which stops every process of the agent's uid before
collecting) still sees them all.
"""

from __future__ import annotations

from tests.sandbox_support import MakeEnv, requires_bwrap, run

pytestmark = requires_bwrap

SECRET = "ptb-candidate-secret-4f1c9a"
# Every way an agent lists processes: /proc entries, their cmdline/environ/status, ps.
WATCH = (
    "for d in /proc/[0-9]*; do cat $d/cmdline $d/environ 2>/dev/null | tr '\\0' ' '; "
    "cat $d/status 2>/dev/null | grep -i '^uid'; done; ps -eo uid=,args= 2>&1"
)


def test_an_unprivileged_user_sees_no_process_of_another(make_env: MakeEnv) -> None:
    async def body() -> tuple[str, str, str]:
        env = make_env()
        await env.start(force_build=False)
        try:
            # A "candidate" (nobody) holding the secret in its argv and environment.
            started = await env.exec(
                f"SECRET={SECRET} setsid bash -c 'exec -a {SECRET} sleep 300' > /dev/null 2>&1 &",
                user="nobody",
                timeout_sec=10,
            )
            assert started.return_code == 0, started.stderr
            await env.exec("sleep 400 > /dev/null 2>&1 &", timeout_sec=10)  # a root process
            as_other = (await env.exec(WATCH, user="daemon", timeout_sec=30)).stdout
            as_root = (await env.exec("ps -eo uid=,args=", timeout_sec=30)).stdout
            mount = (await env.exec("grep ' /proc proc ' /proc/self/mounts", timeout_sec=10)).stdout
            return as_other, as_root, mount
        finally:
            await env.stop(delete=True)

    as_other, as_root, mount = run(body())
    assert SECRET not in as_other and "sleep 400" not in as_other, as_other
    assert SECRET in as_root and "sleep 400" in as_root, as_root  # root's stop still sees them
    assert "hidepid=invisible" in mount or "hidepid=2" in mount, mount
