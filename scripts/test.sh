#!/usr/bin/env bash
# Runs every test tier this machine can run. The docker tier needs a Docker engine:
# it is started (and the offline base image built) when the machine allows it.
set -uo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0
markers="not gpu"
if [ "${PTB_SKIP_DOCKER:-0}" != 1 ] && [ -x scripts/docker/setup_engine.sh ]; then
    if bash scripts/docker/setup_engine.sh && bash scripts/docker/build_base_image.sh; then
        echo "[test] docker tier enabled"
    else
        echo "[test] docker engine unavailable: docker tier will skip"
    fi
fi
exec .venv/bin/python -m pytest -m "$markers" -q --durations=15 "$@"
