#!/usr/bin/env bash
# HumanEval scoring cost: the referee + contained candidate process vs the old in-process runner.
# Usage: bench/humaneval_exec/run.sh [--workers N] [--repeat 3] [--old-commit 34648ad]
# Runs in the task environment (.venv-task: the sandbox's Python, where scoring happens);
# needs the git history for the old runner. Run it as root, as the verifier runs.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$REPO"
PYTHONPATH="$REPO/src" exec "$REPO/.venv-task/bin/python" bench/humaneval_exec/run.py "$@"
