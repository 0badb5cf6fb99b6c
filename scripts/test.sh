#!/usr/bin/env bash
# Runs every test tier this machine can run:
#   host tier    unit + slow (real Harbor trials on the local sandbox) + docker
#   task tier    the in-sandbox code (scorers with real BFCL data, training) in .venv-task
# The docker tier needs an engine: it is started, and the offline base image built,
# when the machine allows it; otherwise those tests skip and say why.
#
# With no arguments the work runs in two streams side by side, each about one core busy:
#   background   .venv-task, the engine and base image, the Docker tier and the tests
#                that need .venv-task, then the task tier
#   foreground   every other host test (the agent-task services' tests among them: two
#                services at once would kill each other's candidates, since both issue
#                uids from 50000 and kill(-1) as each when done)
set -uo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0

host_pytest=(.venv/bin/python -m pytest -m "not gpu" -q --durations=10 -p no:cacheprovider)
# Host tests that run .venv-task's Python: they wait for it in the background stream.
needs_task_venv=(tests/integration/test_eval_cli.py)

task_tier() {
    PYTHONPATH=src .venv-task/bin/python -m pytest -m "not gpu" -q -p no:cacheprovider \
        --durations=10 tests/task
}

# An engine that is up but an image that does not build is a defect, not a missing engine:
# the run fails at the end (its docker tests skip meanwhile). Prints the image's status.
docker_image() {
    [ "${PTB_SKIP_DOCKER:-0}" = 1 ] && return 0
    if ! bash scripts/docker/setup_engine.sh; then
        echo "[test] docker engine unavailable: docker tier will skip"
    elif bash scripts/docker/build_base_image.sh; then
        echo "[test] docker tier enabled"
    else
        echo "[test] the CPU base image failed to build: docker tier FAILED" >&2
        return 1
    fi
}

task_venv() {
    bash scripts/task_venv.sh || { echo "[test] could not build .venv-task" >&2; return 1; }
}

# apt-get first and alone: the engine's setup may use apt too.
# The HTML report is checked in headless Chromium (a missing browser fails that test).
bash scripts/setup_browser.sh || echo "[test] could not install chromium: the report's browser test will fail" >&2

if [ $# -gt 0 ]; then  # tests named on the command line: those, then the task tier
    docker_image; image=$?
    task_venv || exit 1
    "${host_pytest[@]}" --ignore=tests/task "$@"
    host=$?
    task_tier
    task=$?
else
    status=$(mktemp -d /tmp/ptb-test-status.XXXXXX)
    log="$status/background.log"
    (
        task_venv; echo $? > "$status/venv"
        docker_image; echo $? > "$status/image"
        "${host_pytest[@]}" --basetemp=/tmp/ptb-test-docker tests/docker "${needs_task_venv[@]}"
        echo $? > "$status/docker"
        task_tier; echo $? > "$status/task"
    ) > "$log" 2>&1 &
    background=$!
    ignores=(--ignore=tests/task --ignore=tests/docker "${needs_task_venv[@]/#/--ignore=}")
    "${host_pytest[@]}" "${ignores[@]}"
    rest=$?
    wait "$background"
    echo "[test] background stream (.venv-task, docker image, docker tier, task tier):"
    cat "$log"
    read_status() { cat "$status/$1" 2>/dev/null || echo 1; }
    image=$(read_status image)
    docker=$(read_status docker)
    task=$(read_status task)
    [ "$(read_status venv)" -eq 0 ] || task=1
    rm -rf "$status"
    host=$(( docker || rest ))
fi
echo "[test] host tier exit $host, task tier exit $task, base image build exit $image"
[ "$host" -eq 0 ] && [ "$task" -eq 0 ] && [ "$image" -eq 0 ]
