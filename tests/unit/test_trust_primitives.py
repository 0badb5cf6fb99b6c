"""One copy of each trust primitive: no-follow opens are spelled in `core/nofollow.py`.

Every other module opens what an agent or a candidate could have written through its
flags and functions, so a fix there (a missing O_CLOEXEC, a check after the open) reaches
every caller. The exceptions are named: standard-library scripts run by path as an
untrusted identity, where the package is not importable and nothing of ours is at stake.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "posttrainbench"
PRIMITIVES = "core/nofollow.py"
STANDALONE_SCRIPTS = {
    "service/shared/probe.py",  # run as a candidate's uid to test what it can do
    "service/shared/tar_stream.py",  # unpacks a candidate's code as that candidate's uid
}


def _spells_nofollow(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Attribute) and node.attr == "O_NOFOLLOW" for node in ast.walk(tree)
    )


def test_only_the_primitives_spell_o_nofollow() -> None:
    spelled = {
        p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if _spells_nofollow(p)
    }
    assert PRIMITIVES in spelled, "the scan is broken"
    assert spelled - {PRIMITIVES} <= STANDALONE_SCRIPTS
