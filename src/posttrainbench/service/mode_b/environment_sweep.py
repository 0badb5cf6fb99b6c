"""Mode B: nothing a candidate started in its task's environment runs on into the verifier.

A Harbor agent's environment is where the task's verifier runs too. A candidate that leaves a
process behind (``nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; done' &``)
would otherwise write its own reward while the verifier runs (the Mode B security test
did exactly that, and won). The trusted proxy therefore records the environment's
processes before the candidate's first call (:func:`snapshot`) and, when the candidate is
done, freezes and kills every process not in that record (:func:`sweep`), with
``scripts/environment_sweep.sh`` run as root inside the environment: it works on any
environment Harbor offers, since it needs only ``/bin/sh`` and ``/proc``.
"""

from __future__ import annotations

import shlex
from importlib import resources

from harbor.environments.base import BaseEnvironment

from posttrainbench.service.shared.errors import ServiceStateError

SWEEP_TIMEOUT_S = 60


def _script() -> str:
    return (
        resources.files("posttrainbench.service.mode_b")
        .joinpath("scripts", "environment_sweep.sh")
        .read_text(encoding="utf-8")
    )


async def _run(environment: BaseEnvironment, args: list[str]) -> tuple[int, str]:
    command = f"sh -c {shlex.quote(_script())} environment_sweep {shlex.join(args)}"
    result = await environment.exec(command, user="root", timeout_sec=SWEEP_TIMEOUT_S)
    return result.return_code, (result.stdout or "") + (result.stderr or "")


async def snapshot(environment: BaseEnvironment) -> list[str]:
    """The environment's processes now (``pid:starttime``): the ones a sweep spares.

    Raises ``ServiceStateError`` when it cannot be taken: without it no sweep can tell the
    candidate's processes from the environment's own.
    """
    code, output = await _run(environment, ["snapshot"])
    if code != 0:
        raise ServiceStateError(f"cannot list the task environment's processes: {output[-300:]}")
    return output.split()


async def sweep(environment: BaseEnvironment, keep: list[str]) -> str:
    """Freeze, then kill, every process of the environment not in *keep*; its one-line report.

    Raises ``ServiceStateError`` when a process is left (the trial then errors instead of
    being verified with the candidate's process still running).
    """
    code, output = await _run(environment, ["sweep", *keep])
    if code != 0:
        raise ServiceStateError(
            f"the candidate's processes could not all be stopped: {output[-300:]}"
        )
    return output.strip()
