#!/usr/bin/env bash
# Results export + collect over many Harbor trial directories, against a read-only floor.
# Usage: bench/collect/run.sh [--trials 10000] [--keep DIR]
# Needs the host environment (.venv, scripts/setup.sh).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
exec "$REPO/.venv/bin/python" bench/collect/run.py "$@"
