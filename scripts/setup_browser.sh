#!/usr/bin/env bash
# Headless Chromium for the report's browser test (Debian's package). The demo and
# the package never need it; only `make test` installs it. Safe to run again.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
echo "[setup] installing chromium (apt-get) for the report's browser test"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
