"""The zones are the top of the package, the import contracts keep them apart, and each
task carries its zones whole (`make lint` runs the contracts; docs/architecture.md).

A task copies whole zones, so "nothing a task needs is missing inside it" is the same as
"no shipped zone imports the host": the zone contract. These tests tie the contract, the
package's top level and the compilers' zone lists together, so a new top-level module or
a zone copied into no task fails here.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

from posttrainbench.host import payload

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "posttrainbench"
ZONES = {payload.CORE, payload.TASK, payload.SERVICE, payload.HOST}


def _contract(name_start: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].startswith(name_start)]
    return contract


def test_the_package_top_level_is_the_four_zones() -> None:
    modules = {p.name for p in PACKAGE.glob("*.py")}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert modules == {"__init__.py"}
    assert packages == ZONES


def test_the_zone_contract_puts_host_over_task_and_service_over_core() -> None:
    layers = [{name.strip() for name in layer.split("|")} for layer in _contract("Zones")["layers"]]
    assert layers == [
        {"posttrainbench.host"},
        {"posttrainbench.task", "posttrainbench.service"},
        {"posttrainbench.core"},
    ]


def test_each_task_carries_its_zones_and_core() -> None:
    assert set(payload.MODEL_TASK_ZONES) == {payload.CORE, payload.TASK}
    assert set(payload.AGENT_TASK_ZONES) == {payload.CORE, payload.SERVICE}
    # The named exception: Mode B's nested jobs load a host module, so it takes them all.
    assert payload.MODE_B_PLUGIN.startswith(f"posttrainbench.{payload.HOST}.")
    assert importlib.util.find_spec(payload.MODE_B_PLUGIN) is not None
    assert set(payload.MODE_B_ZONES) == ZONES


def test_copy_zones_copies_whole_zones_and_no_caches(tmp_path: Path) -> None:
    dest = payload.copy_zones(tmp_path, payload.MODEL_TASK_ZONES)
    assert {p.name for p in dest.iterdir()} == {"__init__.py", "core", "task"}
    shipped = {p.relative_to(dest) for p in dest.rglob("*.py")}
    source = {
        p.relative_to(PACKAGE)
        for zone in payload.MODEL_TASK_ZONES
        for p in (PACKAGE / zone).rglob("*.py")
    }
    assert shipped == source | {Path("__init__.py")}
    assert not list(dest.rglob("__pycache__"))


def test_the_contracts_hold() -> None:
    # A subprocess: import-linter configures logging with dictConfig, which would disable
    # every logger this test process already has.
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]


def test_the_architecture_page_names_every_package_of_every_zone() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    for zone in ZONES:
        for entry in (PACKAGE / zone).iterdir():
            if entry.name in ("__init__.py", "__pycache__") or entry.suffix not in ("", ".py"):
                continue
            shown = f"`{entry.name}/`" if entry.is_dir() else f"`{entry.name}`"
            assert shown in page, f"docs/architecture.md does not name {zone}/{entry.name}"
