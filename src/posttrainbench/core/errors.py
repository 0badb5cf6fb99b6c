"""Errors a user can cause. The CLI prints their message on one line and exits 2."""


class PtbError(Exception):
    """A mistake in user input or environment that the user can fix."""

    exit_code = 2


class UnknownBenchmarkError(PtbError):
    """The benchmark id is not in the catalog."""


class UnknownModelError(PtbError):
    """The base model id is not in the catalog."""


class OutputDirError(PtbError):
    """An output directory cannot be created or written."""


class RunError(PtbError):
    """A run could not be started (missing tool, bad option)."""
