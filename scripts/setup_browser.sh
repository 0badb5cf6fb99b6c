#!/usr/bin/env bash
# Headless Chromium for the report's browser test (Debian's package). The demo and
# the package never need it; only `make test` installs it. Safe to run again.
set -euo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
source "$(dirname "$0")/lib/apt.sh"
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
echo "[setup] installing chromium (apt-get) for the report's browser test"
apt_install chromium
