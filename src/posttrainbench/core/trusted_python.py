"""How trusted code starts Python: never importing from a directory an untrusted user can write.

Root's hooks, the verifiers and the evaluation service of both task families start Python
where the agent owns the working directory (Harbor runs hooks and ``tests/test.sh`` from the
task's workdir, ``/app``). ``python -m mod`` puts the working directory first on
``sys.path``, ``python script.py`` the script's directory and ``python -`` the empty string:
a ``posttrainbench/__init__.py`` or a ``pathspec.py`` planted there would run as root. So
every trusted interpreter starts with :data:`SAFE_PATH` (``-P``: none of these goes on
``sys.path``, while ``PYTHONPATH``, which the sealed code needs, still does), from
:data:`CWD`, with :data:`ENV` in its environment so that every Python it starts in turn
(multiprocessing's spawn, a library's ``sys.executable`` child) does the same, and none
writes bytecode beside the code it imports. Interpreters that need no ``PYTHONPATH`` use
:data:`ISOLATED` (``-I``) instead.

This module is the one home of these flags: the compilers give its
:data:`TEMPLATE_VALUES` to every template as ``trusted_python`` (``template_tree``), and
trusted Python code that starts a Python builds its command with :func:`argv`.
"""

from __future__ import annotations

from collections.abc import Mapping

SAFE_PATH = "-P"
ISOLATED = "-I"
CWD = "/"
ENV: Mapping[str, str] = {"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# What the shell templates name: `cd {{ trusted_python.cwd }}`, `export {{ trusted_python.exports }}`,
# `python {{ trusted_python.flag }} -m ...` (`.isolated` where no PYTHONPATH is needed).
TEMPLATE_VALUES: Mapping[str, str] = {
    "flag": SAFE_PATH,
    "isolated": ISOLATED,
    "cwd": CWD,
    "exports": " ".join(f"{name}={value}" for name, value in ENV.items()),
}


def argv(python: str, *args: str) -> list[str]:
    """The command line of a trusted Python: *python* with :data:`SAFE_PATH`, then *args*."""
    return [python, SAFE_PATH, *args]


def env(base: Mapping[str, str]) -> dict[str, str]:
    """*base* with :data:`ENV` added (for a trusted Python and everything it starts)."""
    return {**base, **ENV}
