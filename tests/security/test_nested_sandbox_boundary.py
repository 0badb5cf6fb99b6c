"""What nesting local-sandbox instances opens, and what stays shut.

A task that declares ``nested_sandboxes`` gets an extra proc mount (``/run/ptb-nested/proc``)
so that root inside can start inner instances; their root is uid 0 of the host in a user
namespace of its own (root is root, every other id shifted out of the outer's users).
Checked here, with real bwrap:

(a) without the declaration, no proc can be mounted inside an instance, so no
    instance can be started there (with it, the same command works);
(b) the agent's unprivileged user can neither list nor enter the extra mount's dir, and
    the mount has no ``/proc/sys`` for anyone (``subset=pid``);
(c) root of an inner instance reaches nothing of the outer instance that is not bound
    into the inner one. Its ``/proc`` shows the inner pid namespace only, so every
    ``/proc/<pid>/root`` leads to the inner root and no outer process can be named; it
    holds the same kept capabilities as the outer root, in its own user namespace only
    (no mount, no ``nsenter`` into the outer's namespaces); ``/proc/sys`` is read-only;
(d) an inner unprivileged user is no outer user: the outer user of the same number does not
    see its processes.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harbor.models.task.config import NetworkMode

from posttrainbench.host.envs.bwrap import NESTED_ID_SHIFT, NESTED_PROC_MOUNT, NESTED_PROC_PARENT
from tests.nested_support import harness_mounts, inner_command, parse_result
from tests.sandbox_support import MakeEnv, requires_bwrap, run

pytestmark = requires_bwrap

# A minimal inner bwrap with its own /proc, as an inner instance's init makes it.
BWRAP_PROC = (
    "bwrap --unshare-all --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 "
    "--symlink usr/bin /bin --proc /proc --dev /dev -- sh -c 'ls /proc/1 > /dev/null && echo inner-ok'"
)
OUTER_SECRET = "/srv/outer-secret"


def test_no_proc_mount_inside_an_instance_unless_declared(
    make_env: MakeEnv, nested_env_dir: Path
) -> None:
    async def body(env_dir: Path | None) -> str:
        env = make_env(env_dir=env_dir, network=NetworkMode.NO_NETWORK)
        await env.start(force_build=False)
        try:
            result = await env.exec(
                f"{BWRAP_PROC} 2>&1; ls -d {NESTED_PROC_MOUNT} 2>&1", user="root"
            )
            return result.stdout
        finally:
            await env.stop(delete=True)

    plain = run(body(None))
    assert "Can't mount proc" in plain and "inner-ok" not in plain, plain
    assert "No such file" in plain, plain  # and no extra proc mount
    declared = run(body(nested_env_dir))
    assert "inner-ok" in declared, declared


def test_agent_user_cannot_reach_the_extra_proc_mount(
    make_env: MakeEnv, nested_env_dir: Path
) -> None:
    probe = (
        f"ls {NESTED_PROC_PARENT} 2>&1; ls {NESTED_PROC_MOUNT} 2>&1; "
        f"cat {NESTED_PROC_MOUNT}/1/cmdline 2>&1; cd {NESTED_PROC_PARENT} 2>&1; echo end"
    )

    async def body() -> tuple[str, str, str]:
        env = make_env(env_dir=nested_env_dir, network=NetworkMode.NO_NETWORK)
        await env.start(force_build=False)
        try:
            await env.exec("sleep 300 > /dev/null 2>&1 &", user="root")
            agent = (await env.exec(probe, user="nobody")).stdout
            root = (
                await env.exec(f"ls {NESTED_PROC_MOUNT}; stat -c %a {NESTED_PROC_PARENT}")
            ).stdout
            mounts = (await env.exec("cat /proc/self/mountinfo")).stdout
            return agent, root, mounts
        finally:
            await env.stop(delete=True)

    agent, root, mounts = run(body())
    assert agent.count("Permission denied") == 4 and agent.rstrip().endswith("end"), agent
    assert "sleep" not in agent
    entries = root.split()
    assert "1" in entries and entries[-1] == "700", root  # root sees the instance's processes
    assert "sys" not in entries and "sysrq-trigger" not in entries, root  # subset=pid
    (line,) = [m for m in mounts.splitlines() if f" {NESTED_PROC_MOUNT} " in m]
    assert "subset=pid" in line and "hidepid=invisible" in line, line


def test_inner_root_reaches_nothing_of_the_outer_that_is_not_bound(
    make_env: MakeEnv, nested_env_dir: Path
) -> None:
    # Run by the inner instance's root: every way to the outer's root-owned file.
    attack = (
        "grep CapEff /proc/self/status; "
        "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'sleep 424[2]'; "
        f"for d in /proc/[0-9]*; do echo pwned > $d/root{OUTER_SECRET}; "
        f"cat $d/root{OUTER_SECRET}; done 2>/dev/null; "
        f"echo pwned > {OUTER_SECRET} 2>/dev/null || echo no-direct; "
        "mkdir -p /tmp/m; mount --bind / /tmp/m 2>/dev/null || echo no-mount; "
        "nsenter -t 1 -m -p -- true 2>/dev/null && echo joined-1; "
        "echo x > /proc/sys/kernel/core_pattern 2>/dev/null || echo no-sysctl; "
        "echo end"
    )

    async def body() -> tuple[list[dict], str, str]:
        env = make_env(
            env_dir=nested_env_dir, network=NetworkMode.NO_NETWORK, mounts=harness_mounts()
        )
        await env.start(force_build=False)
        try:
            planted = await env.exec(
                f"mkdir -p /srv && echo outer-only > {OUTER_SECRET} && chmod 600 {OUTER_SECRET}"
            )
            assert planted.return_code == 0, planted.stderr
            await env.exec("sleep 4242 > /dev/null 2>&1 &")  # an outer root process
            outer = await env.exec(inner_command("no-network", [("root", attack)]), timeout_sec=180)
            assert outer.return_code == 0, outer.stdout + outer.stderr
            after = (await env.exec(f"cat {OUTER_SECRET}")).stdout
            outer_procs = (await env.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")).stdout
            return parse_result(outer.stdout), after, outer_procs
        finally:
            await env.stop(delete=True)

    (inner,), after, outer_procs = run(body())
    assert after.strip() == "outer-only"
    lines = inner["stdout"].splitlines()
    assert lines[0].split()[1] == "00000000a00405fb", inner  # no CAP_SYS_ADMIN
    assert "sleep 4242" in outer_procs and lines[1] == "0", inner  # inner pid namespace only
    assert "outer-only" not in inner["stdout"] and "pwned" not in inner["stdout"], inner
    assert lines[2:] == ["no-direct", "no-mount", "no-sysctl", "end"], inner


def test_an_inner_users_processes_are_no_outer_users(
    make_env: MakeEnv, nested_env_dir: Path
) -> None:
    """(d) An inner instance's unprivileged uid is not the outer uid of the same number: the
    outer instance's user of that number (here ``nobody``; an outer agent would be an inner
    task's agent user) signals everything it may (``kill -KILL -1``) and the inner process
    of that uid lives on."""
    # The marker is assembled at run time: the harness's own command line must not match.
    inner = inner_command("no-network", [("nobody", "n=43; sleep ${n}43 & sleep 8; echo done")])
    find = (
        "for i in $(seq 240); do p=$(pgrep -f '^sleep 4343$' | head -n 1); "
        '[ -n "$p" ] && break; sleep 0.25; done; stat -c %u /proc/$p'
    )

    async def body() -> tuple[str, str]:
        env = make_env(
            env_dir=nested_env_dir, network=NetworkMode.NO_NETWORK, mounts=harness_mounts()
        )
        await env.start(force_build=False)
        try:
            await env.exec(f"nohup sh -c {shlex.quote(inner)} > /tmp/inner.log 2>&1 &")
            owner = (await env.exec(find, timeout_sec=90)).stdout.strip()
            await env.exec("kill -KILL -1", user="nobody")
            alive = (await env.exec("sleep 0.5; pgrep -c -f '^sleep 4343$'")).stdout.strip()
            return owner, alive
        finally:
            await env.stop(delete=True)

    owner, alive = run(body())
    assert owner == str(NESTED_ID_SHIFT + 65534), owner  # inner nobody, outside every outer user
    assert alive == "1", alive  # the outer nobody could not signal it
