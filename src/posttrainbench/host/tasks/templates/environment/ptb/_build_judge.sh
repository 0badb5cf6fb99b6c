#!/usr/bin/env bash
# The LLM judge's client (layer "judge" of layers.json; the compiler ships this script as
# build_judge.sh in LLM-judged tasks only): the packages of requirements-judge.txt added to
# the task venv, not a venv of their own, so judged and plain tasks on a model share one
# venv. Only what the venv lacks is installed, under $PTB_ROOT/venv: in the image that is
# the venv itself; in the local sandbox's cache it is this layer's own dir, which the
# sandbox stacks over the venv's layer (python, first on PATH, is the venv's).
set -euo pipefail
: "${PTB_ROOT:=/opt/ptb}"
# The venv below may be another cache entry, shared by every task on it: nothing of it
# may change. Every package it has is pinned at its version, so pip installs only what is
# missing and fails rather than up- or downgrade one of them; and Python writes no
# bytecode into it (pip still compiles what it installs).
export PYTHONDONTWRITEBYTECODE=1
pins=$(mktemp)
trap 'rm -f "$pins"' EXIT
python - > "$pins" <<'PY'
import importlib.metadata as metadata
import re

try:  # the packaging that the pip below parses the pins with
    from pip._vendor.packaging.version import InvalidVersion, Version
except ImportError:
    InvalidVersion, Version = ValueError, str

seen = set()
for dist in metadata.distributions():  # in sys.path order: the first of a name is the one imported
    name = dist.metadata["Name"]
    key = re.sub(r"[-_.]+", "-", name or "").lower()
    if not key or key in seen:
        continue
    seen.add(key)
    try:
        Version(dist.version)
    except InvalidVersion:  # a legacy version (a distribution's own package): no pin pip reads
        continue
    print(f"{key}=={dist.version}")
PY
python -m pip install --prefix "$PTB_ROOT/venv" --no-warn-script-location \
    -c "$pins" -r "$PTB_ROOT/requirements-judge.txt"
# For the agent's unprivileged user to read and run, and for root alone to change.
if [ -d "$PTB_ROOT/venv" ]; then
    chmod -R u+rwX,go+rX,go-w "$PTB_ROOT/venv"
fi
