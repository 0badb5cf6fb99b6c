#!/usr/bin/env bash
# The quality checks (`make lint`, run by CI): ruff lint and format, the import contracts
# (pyproject.toml [tool.importlinter]) and the type-check ratchet. Runs every check and
# fails if any failed.
set -uo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
cd "$(dirname "$0")/.."
paths=(src tests bench scripts)
status=0
check() {
    echo "[lint] $*"
    "$@" || status=1
}
check .venv/bin/ruff check "${paths[@]}"
check .venv/bin/ruff format --check "${paths[@]}"
check .venv/bin/lint-imports --no-cache
check .venv/bin/python scripts/mypy_ratchet.py
exit $status
