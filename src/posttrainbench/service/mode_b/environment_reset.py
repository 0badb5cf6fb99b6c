"""Mode B: the inner verifier runs in an instance the candidate never touched.

A Harbor task's verifier runs where the agent ran. A candidate is root in that environment,
so killing its processes (:mod:`~posttrainbench.service.mode_b.environment_sweep`) is not enough:
the files it leaves steer the verifier. Seen: ``/etc/ld.so.preload`` naming a library that
rewrites the answer in every process the verifier starts, and a ``cat`` (or ``chmod``,
which Harbor itself runs as root) first on the verifier's ``PATH`` in ``/opt/ptb/venv/bin``;
either bought 1.0 for a wrong answer.

So once the candidate is done, the trusted proxy carries the task's outputs out as data
(directories and regular files; links, devices and FIFOs are never copied), deletes the
instance, starts a fresh one from the task's image (its root, ``/opt/ptb`` and ``/etc`` as
built; the ``PATH`` of the environment's base, whose directories are all the image's again)
and puts the outputs back at the same paths. Only the Harbor environment API is used
(``download_*``, ``stop``, ``start``, ``upload_*``), so it holds on any environment.

The outputs (:func:`carried_paths`): the task's working directory (its ``workdir``, else
``/app``), the paths its ``task.toml`` declares as ``artifacts``, and Harbor's ``/logs/agent``
and ``/logs/artifacts``. Nothing below a system path is carried (a task that declares one is
refused): everything the verifier runs comes from the image.
"""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment
from harbor.models.task.config import ArtifactConfig, TaskConfig
from harbor.models.trial.paths import EnvironmentPaths

from posttrainbench.core.model_task_layout import MODEL_LAYOUT

DEFAULT_WORKDIR = "/app"
# Where the verifier's programs, libraries and configs come from, and Harbor's own dirs that
# the verifier writes or reads as trusted: never taken from the candidate's instance.
SYSTEM_PATHS: tuple[str, ...] = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    MODEL_LAYOUT.root,
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/tests",
    "/usr",
    "/logs/verifier",
)


class UnverifiableEnvironmentError(Exception):
    """The candidate's environment could not be replaced by a clean one: the trial is not
    graded (the nested job's error policy says so, by this type's name)."""


def _is_system(path: PurePosixPath) -> bool:
    return path == PurePosixPath("/") or any(
        path == PurePosixPath(s) or path.is_relative_to(s) for s in SYSTEM_PATHS
    )


def carried_paths(environment: BaseEnvironment) -> list[str]:
    """The absolute paths whose contents survive into the verifier's fresh instance.

    Raises :class:`UnverifiableEnvironmentError` for a path that is relative or lies below a
    system path (one line, naming it).
    """
    paths = EnvironmentPaths.for_os(environment.os)
    wanted = [
        environment.task_env_config.workdir or DEFAULT_WORKDIR,
        str(paths.agent_dir),
        str(paths.artifacts_dir),
    ]
    task_toml = Path(environment.environment_dir).parent / "task.toml"
    if task_toml.is_file():
        config = TaskConfig.model_validate_toml(task_toml.read_text(encoding="utf-8"))
        wanted += [a.source if isinstance(a, ArtifactConfig) else a for a in config.artifacts]
    carried: list[str] = []
    for raw in wanted:
        path = PurePosixPath(raw)
        if not path.is_absolute() or ".." in path.parts or _is_system(path):
            raise UnverifiableEnvironmentError(
                f"{raw}: a task output must be an absolute path outside {', '.join(SYSTEM_PATHS)}"
            )
        if str(path) not in carried:
            carried.append(str(path))
    return carried


async def fresh_instance(environment: BaseEnvironment, keep: list[str]) -> list[str]:
    """Replace *environment*'s instance by a fresh one holding only *keep* (as data); return
    the paths that were carried (those that existed).

    Raises :class:`UnverifiableEnvironmentError` when any step fails: the caller must not
    let the verifier run in what is left.
    """
    trial_dir = Path(environment.trial_paths.trial_dir)
    try:
        with tempfile.TemporaryDirectory(prefix=".ptb-outputs-", dir=trial_dir) as staging:
            carried = await _carry_out(environment, keep, Path(staging))
            await environment.stop(delete=True)  # every process and file of the instance
            await environment.start(force_build=False)
            await environment.run_healthcheck()
            await _carry_in(environment, carried, Path(staging))
    except UnverifiableEnvironmentError:
        raise
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        raise UnverifiableEnvironmentError(
            f"the task environment could not be replaced by a clean one for the verifier: {text}"
        ) from exc
    return [path for path, _ in carried]


def _slot(staging: Path, index: int) -> Path:
    return staging / str(index)


async def _carry_out(
    environment: BaseEnvironment, keep: list[str], staging: Path
) -> list[tuple[str, bool]]:
    carried: list[tuple[str, bool]] = []
    for path in keep:
        slot = _slot(staging, len(carried))
        if await environment.is_dir(path, user="root"):
            await environment.download_dir(path, slot)
            carried.append((path, True))
        elif await environment.is_file(path, user="root"):
            await environment.download_file(path, slot)
            carried.append((path, False))
    return carried


async def _carry_in(
    environment: BaseEnvironment, carried: list[tuple[str, bool]], staging: Path
) -> None:
    for index, (path, is_dir) in enumerate(carried):
        slot = _slot(staging, index)
        if is_dir:
            # The fresh instance's copy (the task's workspace) gives way to the candidate's,
            # so what it deleted stays deleted.
            await environment.empty_dirs([path], chmod=False)
            await environment.upload_dir(slot, path)
        else:
            await environment.upload_file(slot, path)
