"""What a `ptb` command costs before it does anything: it imports only its own command
module, and runs from compiled bytecode (scripts/setup.sh compiles it once, since Python
writes none where PYTHONDONTWRITEBYTECODE is set)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

_COMMAND_MODULES = """
import json, sys
sys.argv = ["ptb", *sys.argv[1:]]
from posttrainbench.host.cli.app import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("posttrainbench.host.cli.")
                        and m.endswith("_cmd"))))
"""


def _command_modules(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _COMMAND_MODULES, *args], capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_command_imports_only_its_own_module() -> None:
    assert _command_modules("results", "--help") == ["posttrainbench.host.cli.results_cmd"]
    assert _command_modules("contamination", "check", "--help") == [
        "posttrainbench.host.cli.contamination_cmd"
    ]


def test_help_and_unknown_commands_see_every_command() -> None:
    assert len(_command_modules("--help")) > 10
    assert len(_command_modules("no-such-command")) > 10


@pytest.mark.skipif(
    not (REPO / ".venv" / "lib" / ".ptb-bytecode").is_file(),
    reason="a .venv not made by scripts/setup.sh",
)
def test_setup_compiled_the_host_environment() -> None:
    for module in ("pydantic.main", "typer.main", "harbor", "posttrainbench.host.cli.app"):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        cached = importlib.util.cache_from_source(spec.origin)
        assert Path(cached).is_file(), f"{module}: no bytecode at {cached}"
