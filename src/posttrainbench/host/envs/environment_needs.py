"""What a task's environment asks of the local sandbox (``environment/ptb-environment.json``).

Most tasks need nothing beyond the defaults and have no such file. An agent task whose
environment runs nested Harbor trials of candidate agents ("Mode B") declares
``nested_sandboxes`` (its root process starts inner local-sandbox instances) and a
``min_python`` (Harbor itself needs 3.12, while task venvs default to 3.11). The agent-task
compiler writes the file with :data:`NEEDS_FILE_NAME`; the local sandbox reads it with
:func:`load_environment_needs`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

from posttrainbench.core.errors import PtbError
from posttrainbench.task.schemas import _FileModel

NEEDS_FILE_NAME = "ptb-environment.json"
"""The file's name, directly in the task's ``environment/`` dir."""


class EnvironmentNeedsError(PtbError):
    """A task's ``ptb-environment.json`` is malformed."""


class EnvironmentNeeds(_FileModel):
    """The local sandbox features a task's environment needs (all off by default)."""

    nested_sandboxes: bool = Field(
        default=False,
        description=(
            "root inside the instance starts local-sandbox instances of its own: the instance "
            "gets a proc mount that makes bwrap's --proc possible inside, and /dev/net/tun"
        ),
    )
    min_python: str | None = Field(
        default=None,
        pattern=r"^3\.\d{1,2}$",
        description="the lowest sandbox Python the task venv may be built on, e.g. '3.12'",
    )

    @property
    def min_python_version(self) -> tuple[int, int] | None:
        """``min_python`` as ``(major, minor)``, or None."""
        if self.min_python is None:
            return None
        major, minor = self.min_python.split(".")
        return int(major), int(minor)


def load_environment_needs(environment_dir: Path) -> EnvironmentNeeds:
    """The needs declared in ``environment_dir``; the defaults when it has no such file.

    Raises :class:`EnvironmentNeedsError` (one line, naming the file) when it does not
    parse or validate.
    """
    path = environment_dir / NEEDS_FILE_NAME
    if not path.is_file():
        return EnvironmentNeeds()
    try:
        return EnvironmentNeeds.load(path)
    except (ValidationError, ValueError, OSError) as exc:
        detail = " ".join(line.strip() for line in str(exc).splitlines()[:3])
        raise EnvironmentNeedsError(f"{path}: {detail}") from None
