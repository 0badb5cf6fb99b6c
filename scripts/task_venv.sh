#!/usr/bin/env bash
# Builds .venv-task: the task sandbox's Python environment (torch, transformers) plus
# pytest and the reference packages of tests/task/, for the tests of the in-sandbox code.
# Rebuilt only when the requirements change.
set -euo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
cd "$(dirname "$0")/.."
reqs=src/posttrainbench/task/evaluation/requirements.txt
nodeps=src/posttrainbench/task/evaluation/requirements-nodeps.txt
test_reqs=tests/task/requirements.txt
test_nodeps=tests/task/requirements-nodeps.txt
PY="${PTB_SANDBOX_PYTHON:-}"
if [ -z "$PY" ]; then
    PY=$(command -v python3.11 || ls "$HOME"/.pyenv/versions/3.11*/bin/python3.11 2>/dev/null | head -n 1 || true)
fi
[ -n "$PY" ] || PY=python3
stamp=$(cat "$reqs" "$nodeps" "$test_reqs" "$test_nodeps" | sha256sum | cut -c1-16)
if [ -f .venv-task/.ptb-stamp ] && [ "$(cat .venv-task/.ptb-stamp)" = "$stamp" ]; then
    exit 0
fi
echo "[task-venv] building .venv-task with $PY"
rm -rf .venv-task
"$PY" -m venv .venv-task
.venv-task/bin/python -m pip install -q -r "$reqs" -r "$test_reqs"
.venv-task/bin/python -m pip install -q --no-deps -r "$nodeps" -r "$test_nodeps"
echo "$stamp" > .venv-task/.ptb-stamp
