#!/usr/bin/env bash
# Build step (image build, or the local sandbox's cached build): the task's private
# files (config, every split, the baseline used by final scoring) are root-only.
set -eu
root="${PTB_ROOT:-/opt/ptb}"
chown -R 0:0 "$root/agent-task/private"
chmod -R go-rwx "$root/agent-task/private"
