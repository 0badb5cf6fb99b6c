#!/usr/bin/env bash
# Results export + collect over many Harbor trial directories, against a read-only floor;
# every step runs the real `ptb` CLI as a subprocess.
# Usage: bench/collect/run.sh [--trials 5000] [--keep DIR]
# Needs the host environment (.venv, scripts/setup.sh).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
echo "uptime at start: $(uptime)"
"$REPO/.venv/bin/python" bench/collect/run.py "$@"
echo "uptime at end: $(uptime)"
