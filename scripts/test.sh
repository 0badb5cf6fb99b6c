#!/usr/bin/env bash
# Runs every test tier this machine can run:
#   host tier    unit + slow (real Harbor trials on the local sandbox) + docker
#   task tier    the in-sandbox code (scorers with real BFCL data, training) in .venv-task
# The docker tier needs an engine: it is started, and the offline base image built,
# when the machine allows it; otherwise those tests skip and say why.
#
#   scripts/test.sh              every tier (what `make test` and CI run)
#   scripts/test.sh FILE...      those host tests (pytest arguments), then the task tier
#   scripts/test.sh --help       this text; installs nothing
#   make test-fast               unit tests that build no environment (a few minutes)
#
# With no arguments, on 2 cores:
#   background   the engine and base image, then the Docker tier
#   foreground   .venv-task and the task tier
#   then alone   the host tests, in three xdist workers
# Measured here, other pairings were slower or failed: two streams of real trials slowed
# each other several times over (each trains or scores with torch on both cores), and
# the Docker tier beside host tests twice lost a trial's files (docker cp found none of
# the container's /logs: DownloadVerifierDirError); beside the task tier it never did.
# Two agent-task services at once would also kill each other's candidates (both issue
# uids from 50000 and kill(-1) as each when done).
set -uo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0

host_pytest=(.venv/bin/python -m pytest -m "not gpu" -q --durations=10 -p no:cacheprovider)
# The host tests in three xdist workers: one at a time they left the second core idle much
# of the time (sandboxes starting, agent CLIs, Harbor's polling) and took over 55 minutes on
# 2 cores; in three workers 33. tests/conftest.py starts the longest first and keeps the tests that share
# the candidate uid pool in one worker.
host_parallel=("${host_pytest[@]}" -n "${PTB_TEST_WORKERS:-3}" --dist loadgroup)

task_tier() {
    PYTHONPATH=src .venv-task/bin/python -m pytest -m "not gpu and not ptb_agreement" -q \
        -p no:cacheprovider --durations=10 tests/task
}

# An engine that is up but an image that does not build is a defect, not a missing engine:
# the run fails at the end (its docker tests skip meanwhile).
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

# apt-get first and alone: the engine's setup may use apt too.
# The HTML report is checked in headless Chromium (a missing browser fails that test).
bash scripts/setup_browser.sh || echo "[test] could not install chromium: the report's browser test will fail" >&2

if [ $# -gt 0 ]; then  # tests named on the command line: those, then the task tier
    docker_image; image=$?
    bash scripts/task_venv.sh || { echo "[test] could not build .venv-task" >&2; exit 1; }
    "${host_parallel[@]}" --ignore=tests/task "$@"
    host=$?
    task_tier
    task=$?
else
    status=$(mktemp -d /tmp/ptb-test-status.XXXXXX)
    (
        docker_image; echo $? > "$status/image"
        "${host_pytest[@]}" --basetemp=/tmp/ptb-test-docker tests/docker
        echo $? > "$status/docker"
    ) > "$status/docker.log" 2>&1 &
    background=$!
    if bash scripts/task_venv.sh; then
        task_tier
        task=$?
    else
        echo "[test] could not build .venv-task" >&2
        task=1
    fi
    wait "$background"
    echo "[test] Docker stream (engine, base image, Docker tier):"
    cat "$status/docker.log"
    image=$(cat "$status/image" 2>/dev/null || echo 1)
    docker=$(cat "$status/docker" 2>/dev/null || echo 1)
    rm -rf "$status"
    # pytest exits 5 when it collected nothing (every docker test deselected): not a failure.
    [ "$docker" -eq 5 ] && docker=0
    "${host_parallel[@]}" --ignore=tests/task --ignore=tests/docker
    rest=$?
    host=$(( docker || rest ))
fi
echo "[test] host tier exit $host, task tier exit $task, base image build exit $image"
[ "$host" -eq 0 ] && [ "$task" -eq 0 ] && [ "$image" -eq 0 ]
