"""The agent task's trusted verifier: ``tests/test.sh`` runs it as root, after the agent.

Each step relies on the ones before it:

1. **quiesce**: every process that is not root's is killed, by uid, and checked gone.
   From here on nothing untrusted runs, so nothing can race what root does next.
2. **lock the output**: the verifier's directory becomes root's, 0755, and holds nothing
   but Harbor's own log (the start script locked it before the agent ran, too).
3. **close the service**: ``/finalize`` (it waits for the requests in flight), keep its
   record, stop it; quiesce again (the candidates of a last evaluation).
4. **final scoring** (``final_score``, with the task's declared secrets) into a root-only
   staging directory; quiesce again.
5. **audit** (``audit``): probes as the agent and as a fresh candidate uid, the ownership
   and mode sweep; quiesce; ``isolation.json`` and the isolation verdict.
6. **publish**: ``final.json``, then ``reward.json`` (last), sealed (``reward_seal``);
   test.sh's final command checks the seal.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from posttrainbench.core import trusted_python
from posttrainbench.core.agent_task_layout import LAYOUT, TaskLayout
from posttrainbench.core.atomic_write import write_text_atomic
from posttrainbench.core.errors import PtbError
from posttrainbench.core.secrets_file import load_secrets
from posttrainbench.service.api.scoring import load_config
from posttrainbench.service.api.service import DRAIN_GRACE_S
from posttrainbench.service.api.summary import StatePaths
from posttrainbench.service.shared.identity import IdentityPool, is_running, user_identity
from posttrainbench.service.verifier.audit import Audit
from posttrainbench.service.verifier.reward_seal import publish

HARBOR_LOG = "test-stdout.txt"  # Harbor writes the verifier's output here, as root
_STOP_WAIT_S = 10.0


def lock_output(out_dir: Path) -> None:
    """Make *out_dir* root's and 0755, and remove everything in it but Harbor's log."""
    info = os.lstat(out_dir)
    if not stat.S_ISDIR(info.st_mode):
        raise PtbError(f"{out_dir} is not a directory")
    os.chown(out_dir, 0, 0)
    os.chmod(out_dir, 0o755)
    for entry in os.scandir(out_dir):
        if entry.name == HARBOR_LOG and entry.is_file(follow_symlinks=False):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def finalize_service(url: str, token_file: Path, out: Path, timeout_s: float) -> str:
    """POST /finalize with the admin token; save the record to *out*; return what happened."""
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        return f"no admin token ({exc.strerror}): the service never started"
    request = urllib.request.Request(
        f"{url}/finalize", data=b"", method="POST", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            summary = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"cannot finalize the service: {exc}"
    write_text_atomic(out, json.dumps(summary, indent=2) + "\n")
    return f"finalized: {len(summary.get('charges', []))} charges recorded"


def stop_service(pid_file: Path) -> None:
    """Kill the service's process group and wait until it is gone."""
    try:
        pid = int(pid_file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + _STOP_WAIT_S
    while is_running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_final_scoring(
    layout: TaskLayout, staging: Path, log: Path, secrets_file: Path | None, secret_names: list[str]
) -> int:
    """``final_score`` in a child process (with the declared secrets in its environment)."""
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(mode=0o700)
    env = trusted_python.env(os.environ)
    if secret_names:
        env.update(
            load_secrets(secrets_file or Path(layout.secrets_dir) / "secrets.json", secret_names)
        )
    argv = trusted_python.argv(
        sys.executable,
        "-m",
        "posttrainbench.service.verifier.final_score",
        "--config",
        layout.config,
        "--state-dir",
        layout.state,
        "--out-dir",
        str(staging),
        "--work-dir",
        layout.runs_root,
    )
    with open(log, "ab") as handle:
        return subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=trusted_python.CWD,
        ).returncode


def main(argv: list[str] | None = None) -> int:
    """``python -m posttrainbench.service.verifier.run --agent-user U --service-url URL [--secrets-file F]``."""
    parser = argparse.ArgumentParser(
        prog="python -m posttrainbench.service.verifier.run", description=__doc__
    )
    parser.add_argument("--agent-user", required=True)
    parser.add_argument("--service-url", required=True)
    parser.add_argument("--secrets-file", type=Path, default=None)
    args = parser.parse_args(argv)
    layout, out = LAYOUT, Path(LAYOUT.verifier_out)
    config = load_config(Path(layout.config))
    paths = StatePaths(Path(layout.state))
    try:
        agent = user_identity(args.agent_user)
        home: str | None = pwd.getpwnam(args.agent_user).pw_dir
    except PtbError:
        agent, home = None, None
    audit = Audit(
        layout,
        agent,
        IdentityPool(paths.identities),
        config.limits,
        urllib.parse.urlparse(args.service_url).port,
        home,
    )

    audit.quiesce("the agent finished")
    lock_output(out)
    # The service drains its requests in flight (one evaluation's time at most) before it answers.
    print(
        finalize_service(
            args.service_url,
            paths.token,
            out / "service_summary.json",
            config.timeouts.per_eval_s + DRAIN_GRACE_S + 30,
        )
    )
    stop_service(Path(layout.service_root) / "service.pid")
    audit.quiesce("the service stopped")
    if (Path(layout.service_root) / "service.log").is_file():
        shutil.copyfile(Path(layout.service_root) / "service.log", out / "service.log")

    status = run_final_scoring(
        layout, paths.final, out / "final_score.log", args.secrets_file, config.secrets
    )
    print(f"final scoring exited with status {status}")
    audit.quiesce("final scoring finished")

    for step in (audit.probe_agent, audit.probe_candidate):
        try:
            step()
        except Exception as exc:
            audit.report.control = False
            audit.deviate("audit_error", step.__name__, f"{type(exc).__name__}: {exc}")
    audit.quiesce("the probes finished")
    audit.sweep()
    audit.write(out)
    print(
        f"integrity audit: {'FLAGGED' if audit.report.flagged else 'clean'} "
        f"({len(audit.report.deviations)} deviation(s))"
    )

    if (paths.final / "reward.json").is_file():
        publish(paths.final, out, paths.root)  # the reward, last
    return 0


if __name__ == "__main__":
    sys.exit(main())
