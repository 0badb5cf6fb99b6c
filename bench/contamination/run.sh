#!/usr/bin/env bash
# Contamination-checker throughput vs a straightforward pure-Python checker, one run.
# Usage: bench/contamination/run.sh [--mb 300] [--planted 10] [--naive-mb 6] [--small-runs 5]
# Needs the host environment (.venv, scripts/setup.sh) and ../shared/data/gsm8k.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
exec "$REPO/.venv/bin/python" bench/contamination/run.py "$@"
