"""No root or service interpreter of a compiled task can import from a directory an untrusted
user can write (issue 36, item 1).

Harbor starts the hooks and ``tests/test.sh`` in the task's workdir, the agent's ``/app``,
where ``python -m`` would put the agent's files first on ``sys.path``. Every Python that a
trusted script of a compiled task starts (model task and agent task, Mode A and Mode B) must
run with ``-P`` or ``-I``, from a ``cd /`` made before it, with ``PYTHONSAFEPATH`` for what
it starts in turn; the payload's own spawn sites use ``posttrainbench.core.trusted_python`` (or
``-I``). The real-trial probe is the hostile agent of ``test_agent_task_boundary.py``, which
plants ``posttrainbench``, ``pathspec`` and ``packaging`` shims in ``/app``.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainbench.core import trusted_python
from posttrainbench.host.agent_tasks.compiler import BuildOptions, build_agent_task
from posttrainbench.host.tasks.compiler import compile_task
from posttrainbench.host.tasks.options import CompileOptions

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PYTHON = re.compile(r"(?:^|/)python(?:3(?:\.\d+)?)?$")
# Scripts of a compiled task that trusted code does not run after the agent could have
# written anything: image build steps (before the agent exists), and the agent's own tools
# and the scripted solution (run as the agent, untrusted anyway).
NOT_TRUSTED_AFTER_THE_AGENT = re.compile(
    r"^environment/(?:ptb/(?:build[^/]*\.sh|_build_judge\.sh)|workspace/|agent_clis/)"
    r"|^solution/"
)
# Spawn sites of payload code that run on the host only.
HOST_ONLY_SOURCES = {"task/benchmarks/fetch.py"}
PAYLOAD_DIRS = ("core", "task", "service")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compiled")
    model = compile_task("bfcl", "smollm2-135m", root / "model", CompileOptions(hours=0.5))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PTB_CACHE_DIR", str(root / "cache"))
        mode_a = build_agent_task(
            REPO / "examples" / "agent-task-gsm8k" / "task.yaml", root / "agent", BuildOptions()
        )
        mode_b = build_agent_task(
            REPO / "examples" / "agent-task-harbor" / "task.yaml", root / "nested", BuildOptions()
        )
    return {"model task": model, "agent task": mode_a, "Mode B agent task": mode_b}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Shell lines with continuations joined, comments and heredoc bodies left out."""
    lines: list[tuple[int, str]] = []
    raw = text.splitlines()
    i, heredoc = 0, None
    while i < len(raw):
        start, line = i + 1, raw[i]
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            i += 1
            continue
        while line.endswith("\\") and i + 1 < len(raw):
            i += 1
            line = line[:-1] + " " + raw[i]
        i += 1
        marker = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if marker:
            heredoc = marker.group(1)
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            lines.append((start, stripped))
    return lines


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return line.split()


def python_problems(script: str, text: str) -> list[str]:
    """Each Python the script starts without -P/-I, before a `cd /`, or (-P) without
    PYTHONSAFEPATH for its children."""
    problems, cwd_trusted = [], False
    safe_path_exported = False
    for number, line in _logical_lines(text):
        words = _words(line)
        if words[:2] == ["cd", trusted_python.CWD]:
            cwd_trusted = True
        if words and words[0] == "export" and "PYTHONSAFEPATH=1" in words:
            safe_path_exported = True
        for index, word in enumerate(words):
            if not PYTHON.search(word):
                continue
            flags: list[str] = []
            for option in words[index + 1 :]:
                if not option.startswith("-") or option in ("-", "-m", "-c"):
                    break
                flags.append(option)
            letters = "".join(f[1:] for f in flags if not f.startswith("--"))
            where = f"{script}:{number}: {line[:100]}"
            if "I" not in letters and "P" not in letters:
                problems.append(f"{where} (no -P or -I)")
            elif "I" not in letters and not (safe_path_exported or "PYTHONSAFEPATH=1" in words):
                problems.append(f"{where} (-P without PYTHONSAFEPATH for what it starts)")
            if not cwd_trusted:
                problems.append(f"{where} (not after `cd {trusted_python.CWD}`)")
    return problems


def _trusted_scripts(task: Path) -> list[Path]:
    scripts = [
        p
        for p in sorted(task.rglob("*"))
        if p.is_file()
        and (p.suffix == ".sh" or p.name == "task.toml")
        and "/lib/" not in p.as_posix()
        and not NOT_TRUSTED_AFTER_THE_AGENT.search(p.relative_to(task).as_posix())
    ]
    return scripts


def test_every_python_a_trusted_script_starts_is_isolated_from_its_cwd(compiled) -> None:
    seen: dict[str, int] = {}
    problems: list[str] = []
    for family, task in compiled.items():
        for script in _trusted_scripts(task):
            text = script.read_text()
            rel = f"{family}: {script.relative_to(task)}"
            count = sum(
                PYTHON.search(w) is not None
                for _, line in _logical_lines(text)
                for w in _words(line)
            )
            if count:
                seen[rel] = count
            problems += python_problems(rel, text)
    assert problems == []
    # The scan saw the interpreters it is about (a renamed script would otherwise pass here).
    for needed in (
        "model task: tests/test.sh",
        "model task: environment/ptb/collect.sh",
        "agent task: tests/test.sh",
        "agent task: environment/ptb/start.sh",
        "Mode B agent task: tests/test.sh",
        "Mode B agent task: environment/ptb/start.sh",
    ):
        assert seen.get(needed, 0) >= 1, (needed, seen)


def test_the_scan_catches_an_unsafe_python() -> None:
    assert python_problems("s", "cd /\nexport PYTHONSAFEPATH=1\npython -m x\n")
    assert python_problems("s", "python -P -m x\n")  # no cd /
    assert python_problems("s", "cd /\n/opt/ptb/venv/bin/python -P -m x\n")  # no PYTHONSAFEPATH
    assert python_problems("s", "cd /\ntimeout 3 \\\n  /usr/bin/python3 -u x.py\n")
    assert not python_problems("s", "cd /\nexport PYTHONSAFEPATH=1\npython -P -m x\n")
    assert not python_problems("s", "cd /\npython -I - <<'PY'\nimport os\nPY\n")


def _spawn_sites() -> list[tuple[str, int, str]]:
    """Every list literal in payload code that starts with ``sys.executable`` or
    ``launcher_python()``: (file, line, its second element)."""
    sites = []
    for directory in PAYLOAD_DIRS:
        for path in sorted((SRC / "posttrainbench" / directory).rglob("*.py")):
            rel = path.relative_to(SRC / "posttrainbench").as_posix()
            if rel in HOST_ONLY_SOURCES or "/templates/" in f"/{rel}":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.List) or len(node.elts) < 2:
                    continue
                first = ast.unparse(node.elts[0])
                if first in ("sys.executable", "launcher_python()"):
                    second = node.elts[1]
                    flag = second.value if isinstance(second, ast.Constant) else ast.unparse(second)
                    sites.append((rel, node.lineno, str(flag)))
    return sites


def test_trusted_code_starts_python_isolated_or_through_the_helper() -> None:
    sites = _spawn_sites()
    assert sites, "no spawn site found: the scan is broken"
    assert [
        s for s in sites if s[2] not in (trusted_python.ISOLATED, trusted_python.SAFE_PATH)
    ] == []
    # The service's own Python children (final scoring, nested Harbor jobs) go through the helper.
    for module in ("service/verifier/run.py", "service/mode_b/nested_harbor.py"):
        assert "trusted_python.argv(" in (SRC / "posttrainbench" / module).read_text(), module


def _plant(directory: Path) -> Path:
    """A hostile working directory: a posttrainbench package and a lazily imported module."""
    marker = directory / "MARKER"
    hijack = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (directory / "posttrainbench").mkdir(parents=True)
    (directory / "posttrainbench" / "__init__.py").write_text(hijack)
    (directory / "shadowed.py").write_text(hijack)
    return marker


# The child imports the payload (the package the plant shadows), then starts a plain
# `python -c` that imports the planted module lazily, as a library's subprocess would.
CHILD = """
import subprocess, sys
try:
    import posttrainbench.core.trusted_python
except ImportError:  # the plant, when it was imported instead
    pass
subprocess.run([sys.executable, "-c", "import shadowed"], stderr=subprocess.DEVNULL)
"""


def test_the_spawn_helper_keeps_a_planted_cwd_out_of_the_child_and_its_children(
    tmp_path: Path,
) -> None:
    hostile = tmp_path / "app"
    marker = _plant(hostile)
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC)}
    ours = subprocess.run(
        trusted_python.argv(sys.executable, "-c", CHILD),
        cwd=hostile,
        env=trusted_python.env(base),
        capture_output=True,
        text=True,
    )
    assert ours.returncode == 0, ours.stderr
    assert not marker.exists(), marker.read_text()
    # Control: the same child started plainly from the same directory imports both plants.
    plain = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=hostile, env=base, capture_output=True, text=True
    )
    assert marker.read_text().split() == ["posttrainbench", "shadowed"], plain.stderr
