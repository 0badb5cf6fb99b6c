"""The agent task's declared secrets inside its environment: one root-only JSON file.

PostTrainBench's environment plugins (see :mod:`posttrainbench.host.envs.service_secrets`)
write ``/run/ptb-secrets/secrets.json`` (directory 0700, file 0600, both root) right
after the environment starts and before the healthcheck starts the service. Only the
trusted side reads it: the evaluation service (``serve --secrets-file``) and the
verifier, for its final-scoring child (``service.verifier.run``).
They put the values into their own process environment; candidate code never gets them
(its environment is built from an allow-list, see ``runas``).

Runs inside the task on Python 3.11 too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, MutableMapping
from pathlib import Path

from pydantic import RootModel, ValidationError

from posttrainbench.core.errors import PtbError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRETS_DIR = "/run/ptb-secrets"
SECRETS_PATH = f"{SECRETS_DIR}/secrets.json"


def check_env_names(names: list[str], what: str = "name") -> list[str]:
    """*names* unchanged when each is an environment variable name; else ValueError."""
    for name in names:
        if not _ENV_NAME.match(name):
            raise ValueError(f"{what} {name!r} is not an environment variable name")
    return names


class SecretsFileError(PtbError):
    """The delivered secrets file is missing, unreadable or lacks a declared secret."""


class SecretValues(RootModel[dict[str, str]]):
    """``secrets.json``: declared variable name -> its value (the only file that holds values)."""


def load_secrets(path: Path, required: Iterable[str]) -> dict[str, str]:
    """The values in *path*; refuses (one line, names only) when any of *required* is missing."""
    path = Path(path)
    try:
        values = SecretValues.model_validate_json(path.read_bytes()).root
    except OSError as exc:
        raise SecretsFileError(
            f"cannot read the task's secrets file {path}: {exc.strerror}"
        ) from None
    except ValidationError:
        # The message would quote the input (the values): say only that it is malformed.
        raise SecretsFileError(
            f"the task's secrets file {path} is not a JSON object of names to strings"
        ) from None
    missing = [name for name in required if not values.get(name)]
    if missing:
        raise SecretsFileError(
            f"the task's secrets file {path} lacks declared secret(s): {', '.join(missing)}"
        )
    return values


def export_secrets(values: dict[str, str], environ: MutableMapping[str, str] | None = None) -> None:
    """Put *values* into this (trusted, root) process's environment, so its own children inherit them."""
    target = os.environ if environ is None else environ
    target.update(values)
