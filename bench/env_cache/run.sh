#!/usr/bin/env bash
# Time to the agent's first command (cold, hours-only change, another benchmark, fully
# cached) and the environment cache's size, with a private PTB_CACHE_DIR.
# Usage: bench/env_cache/run.sh [--keep] [--work DIR]
# Needs the host environment (.venv, scripts/setup.sh), bubblewrap and about 5 GB of disk.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
export HARBOR_TELEMETRY=0
exec "$REPO/.venv/bin/python" bench/env_cache/run.py "$@"
