"""The import contracts (`make lint` runs them) say what the compilers copy, and nothing less.

The compilers' payload lists are the one home of what is copied into a task; a contract
that forbade less than "everything else" would let a payload module import host code that
is missing inside the task. These tests derive the contracts' lists from the compilers'
and from the package's top-level names, so a new host package or payload module fails
here until the contract in pyproject.toml says so.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from posttrainbench.optimize import compiler as agent_task_compiler
from posttrainbench.tasks import compiler as model_task_compiler

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "posttrainbench"
HOST_ONLY_EXTERNAL = {"harbor", "typer", "rich"}


def _contract(name_start: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].startswith(name_start)]
    return contract


def _top_level_names() -> set[str]:
    names = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return names | {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}


def _dotted(names: set[str]) -> set[str]:
    return {f"posttrainbench.{n}" for n in names}


def test_the_model_task_contract_forbids_all_that_the_compiler_does_not_copy() -> None:
    payload = set(model_task_compiler.PAYLOAD_PACKAGES) | {
        Path(m).stem for m in model_task_compiler.PAYLOAD_MODULES if m != "__init__.py"
    }
    contract = _contract("The model-task payload")
    assert set(contract["source_modules"]) == _dotted(payload)
    assert set(contract["forbidden_modules"]) == (
        _dotted(_top_level_names() - payload) | HOST_ONLY_EXTERNAL
    )


def test_the_agent_task_contract_forbids_all_that_the_compiler_does_not_copy() -> None:
    copied = {Path(m).parts[0].removesuffix(".py") for m in agent_task_compiler.PAYLOAD_MODULES}
    contract = _contract("The agent-task payload")
    assert contract["source_modules"] == ["posttrainbench.optimize"]
    # The service runs on FastAPI inside the task; only the CLI's libraries are host-only.
    assert set(contract["forbidden_modules"]) == (
        _dotted(_top_level_names() - copied - {"__init__", "optimize"}) | {"typer", "rich"}
    )


def test_the_contracts_hold() -> None:
    # A subprocess: import-linter configures logging with dictConfig, which would disable
    # every logger this test process already has.
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]
