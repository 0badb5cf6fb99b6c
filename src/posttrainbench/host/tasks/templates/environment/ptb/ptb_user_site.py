"""Lets the task's unprivileged user (the agent) install packages: ``pip install`` goes
to its user site (~/.local), which this puts ahead of the task venv's site-packages.

build_venv.sh copies this module into the task venv's site-packages with a ``.pth`` line
that calls :func:`enable` at every interpreter start. site.py reads a venv's ``.pth``
files twice, before and after it turns user sites off for an isolated venv, so the
second call is the one that counts. For root (the trusted collect hook, the verifier)
and under ``-s``/``-I`` it does nothing: trusted code never imports from a directory
the agent can write. pip itself, finding the venv read-only and ``site.ENABLE_USER_SITE``
set, defaults to a user install.
"""

import os
import site
import sys


def enable() -> None:
    """Turn the user site on, ahead of the venv's site-packages (unprivileged users only)."""
    if os.getuid() == 0 or sys.flags.no_user_site or sys.flags.isolated:
        return
    site.ENABLE_USER_SITE = True
    user_site = site.getusersitepackages()
    before = list(sys.path)
    site.addsitedir(user_site)  # also runs the .pth files of the agent's own installs
    added = [entry for entry in sys.path if entry not in before]
    venv_site = next((i for i, entry in enumerate(before) if entry.endswith("site-packages")), len(before))
    sys.path[:] = before[:venv_site] + added + before[venv_site:]

