#!/usr/bin/env bash
# GSM8K CPU throughput: posttrainbench's evaluation vs lm-eval-harness (hf), one run.
# Usage: bench/eval_throughput/run.sh [run.py options: --limit N --batch-size B --threads T ...]
#
# lm-eval and its extra dependencies go into an overlay venv under .cache/bench/ that
# sees .venv-task's packages (torch, transformers) through a .pth file, so .venv-task
# itself is left untouched and torch is never replaced.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
TASK_VENV="$REPO/.venv-task"
VENV="$REPO/.cache/bench/venv-lmeval"
LM_EVAL_PIN="lm-eval[hf]==0.4.13"

[ -x "$TASK_VENV/bin/python" ] || { echo "missing $TASK_VENV (scripts/task_venv.sh builds it)" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import lm_eval, datasets, accelerate" 2>/dev/null; then
  PY="$(readlink -f "$TASK_VENV/bin/python")"
  "$PY" -m venv "$VENV"
  SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$TASK_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$SITE/_ptb_task_venv.pth"
  "$VENV/bin/python" -m pip install -q "$LM_EVAL_PIN"
fi
TORCH_BEFORE="$("$TASK_VENV/bin/python" -c 'import torch; print(torch.__version__)')"
TORCH_NOW="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
[ "$TORCH_BEFORE" = "$TORCH_NOW" ] || { echo "torch changed: $TORCH_BEFORE -> $TORCH_NOW" >&2; exit 1; }
cd "$REPO"
PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" exec "$VENV/bin/python" bench/eval_throughput/run.py "$@"
