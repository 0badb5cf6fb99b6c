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

.venv/bin/python -m pytest -m "not gpu" -q --durations=10 --ignore=tests/task "$@"
host=$?
PYTHONPATH=src .venv-task/bin/python -m pytest -m "not gpu" -q -p no:cacheprovider \
    --durations=10 tests/task
task=$?
echo "[test] host tier exit $host, task tier exit $task, base image build exit $image"
[ "$host" -eq 0 ] && [ "$task" -eq 0 ] && [ "$image" -eq 0 ]
