#!/usr/bin/env bash
# The last build step (layer "task" of layers.json: the task's own files, which the
# local sandbox keeps apart from the venv and the model). Everything in /opt/ptb is for
# the agent's unprivileged user to read and run (the sealed test data is not here), and
# for root alone to change.
set -euo pipefail
: "${PTB_ROOT:=/opt/ptb}"
chmod -R u+rwX,go+rX,go-w "$PTB_ROOT"
