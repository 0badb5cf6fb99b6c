#!/usr/bin/env bash
# Runs every test tier this machine can run:
#   host tier    unit + slow (real Harbor trials on the local sandbox) + docker
#   task tier    the in-sandbox code (scorers with real BFCL data, training) in .venv-task
# The docker tier needs an engine: it is started, and the offline base image built,
# when the machine allows it; otherwise those tests skip and say why.
set -uo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0

# An engine that is up but an image that does not build is a defect, not a missing engine:
# the run fails at the end (its docker tests skip meanwhile).
image=0
if [ "${PTB_SKIP_DOCKER:-0}" != 1 ]; then
    if ! bash scripts/docker/setup_engine.sh; then
        echo "[test] docker engine unavailable: docker tier will skip"
    elif bash scripts/docker/build_base_image.sh; then
        echo "[test] docker tier enabled"
    else
        echo "[test] the CPU base image failed to build: docker tier FAILED" >&2
        image=1
    fi
fi

bash scripts/task_venv.sh || { echo "[test] could not build .venv-task" >&2; exit 1; }
# The HTML report is checked in headless Chromium (a missing browser fails that test).
bash scripts/setup_browser.sh || echo "[test] could not install chromium: the report's browser test will fail" >&2

host_pytest=(.venv/bin/python -m pytest -m "not gpu" -q --durations=10 -p no:cacheprovider)
task_tier() {
    PYTHONPATH=src .venv-task/bin/python -m pytest -m "not gpu" -q -p no:cacheprovider \
        --durations=10 tests/task
}

if [ $# -gt 0 ]; then  # tests named on the command line: one host run, then the task tier
    "${host_pytest[@]}" --ignore=tests/task "$@"
    host=$?
    task_tier
    task=$?
else
    # Tests mostly wait on trials (about one core each), so tiers run two at a time, in
    # pairs that cannot disturb each other. Each run has its own temp root; a background
    # run's output is printed after it ends.
    #  1. the Docker tier beside the task tier (plain processes, no sandbox, no container);
    #  2. stream A beside stream B. A holds every test whose candidates run as the fresh
    #     uids an agent-task service issues (from 50000, then kill(-1) as each uid: two such
    #     tests at once would kill each other's candidates), and the real agent CLIs, which
    #     balance it; B is every other host test.
    stream_a=(
        tests/integration/test_agent_clis.py
        tests/integration/test_agent_task_e2e.py
        tests/integration/test_agent_task_mode_b_e2e.py
        tests/integration/test_agent_task_secrets.py
        tests/integration/test_optimize_mode_b.py
        tests/security/test_agent_clis_readonly.py
        tests/security/test_agent_task_audit.py
        tests/security/test_agent_task_boundary.py
        tests/security/test_agent_task_mode_b_boundary.py
        tests/security/test_scorer_humaneval.py
        tests/unit/test_optimize_candidates.py
        tests/unit/test_optimize_containment.py
        tests/unit/test_optimize_mode_b.py
        tests/unit/test_optimize_scorer.py
        tests/unit/test_optimize_service.py
    )
    log=$(mktemp /tmp/ptb-test-log.XXXXXX)
    task_tier > "$log" 2>&1 &
    pid=$!
    "${host_pytest[@]}" --basetemp=/tmp/ptb-test-docker tests/docker
    docker=$?
    wait "$pid"
    task=$?
    echo "[test] task tier:"; cat "$log"
    "${host_pytest[@]}" --basetemp=/tmp/ptb-test-a "${stream_a[@]}" > "$log" 2>&1 &
    pid=$!
    "${host_pytest[@]}" --basetemp=/tmp/ptb-test-b --ignore=tests/task --ignore=tests/docker \
        "${stream_a[@]/#/--ignore=}"
    host_b=$?
    wait "$pid"
    host_a=$?
    echo "[test] host stream A (agent-task candidates, agent CLIs):"; cat "$log"
    rm -f "$log"
    # pytest exits 5 when it collected nothing (the docker tier deselected by -m): not a failure.
    [ "$docker" -eq 5 ] && docker=0
    host=$(( docker || host_a || host_b ))
fi
echo "[test] host tier exit $host, task tier exit $task, base image build exit $image"
[ "$host" -eq 0 ] && [ "$task" -eq 0 ] && [ "$image" -eq 0 ]
