#!/usr/bin/env bash
# Installs the pinned agent CLIs (package.json, package-lock.json) into ./node_modules from
# the npm registry, outside the agent's clock: the local sandbox runs it once per cache
# (posttrainbench.host.envs.agent_clis) and binds the result read-only at /opt/agent-clis.
# Harbor's installed agents then find each CLI at its pinned version and skip their
# own download. No package's install script runs except Claude Code's and OpenCode's,
# which only move their native binary (from their platform package) into place.
set -euo pipefail
cd "$(dirname "$0")"
command -v node >/dev/null && command -v npm >/dev/null || {
    echo "agent CLIs need Node.js and npm on this machine (apt-get install nodejs npm)" >&2
    exit 3
}
npm install --no-audit --no-fund --ignore-scripts --no-save --loglevel=error
npm rebuild @anthropic-ai/claude-code opencode-ai --ignore-scripts=false --loglevel=error
for cli in node_modules/.bin/*; do
    echo "$(basename "$cli"): $("$cli" --version 2>&1 | head -n 1)"
done
