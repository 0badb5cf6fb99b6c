#!/usr/bin/env bash
# Installs everything the host needs, idempotently: bubblewrap and slirp4netns (the
# network of a sandbox, without the host's loopback) for the local sandbox, gdb and gcc (a test's
# attacks), uv, and the locked Python environment in .venv. Safe to run again.
set -euo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
cd "$(dirname "$0")/.."
source scripts/lib/apt.sh

log() { printf '[setup] %s\n' "$*"; }

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v slirp4netns >/dev/null 2>&1 || need_apt+=(slirp4netns)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# The results store is a SQLite database; the README queries it with the sqlite3 shell.
command -v sqlite3 >/dev/null 2>&1 || need_apt+=(sqlite3)
# The Mode B security test's hostile candidate attacks with a debugger.
command -v gdb >/dev/null 2>&1 || need_apt+=(gdb)
# ... and a preload library it builds with a C compiler.
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
    log "installing ${need_apt[*]} (apt-get)"
    apt_install "${need_apt[@]}"
fi

# Python >= 3.12 for the host package (Harbor needs it).
find_python() {
    for candidate in "${PTB_HOST_PYTHON:-}" python3.13 python3.12 \
        "$HOME"/.pyenv/versions/3.13*/bin/python3.13 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
        [ -n "$candidate" ] || continue
        # The interpreter itself, not a pyenv shim: given a shim, uv sync recreated .venv at
        # every call (its interpreter "changed"), a minute each time.
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}
PY=$(find_python) || { echo "error: Python >= 3.12 not found; set PTB_HOST_PYTHON" >&2; exit 2; }

# uv installs the locked dependencies; keep it in a private tools venv.
UV=.tools/bin/uv
if [ ! -x "$UV" ]; then
    log "installing uv into .tools/"
    "$PY" -m venv .tools
    .tools/bin/python -m pip install -q uv
fi
export UV_PYTHON_DOWNLOADS=never
log "syncing .venv from uv.lock"
"$UV" sync --frozen --quiet --python "$PY"
# Bytecode is compiled here: where PYTHONDONTWRITEBYTECODE is set (as on this project's
# machines) Python never writes it, and every `ptb`, `harbor` and test process compiled
# pydantic, Harbor and the package from source again (`ptb` start-up: 1.75 s of CPU before,
# 0.6 s after, measured under load). Once per lock file (uv's --compile-bytecode recompiled everything at every sync: a minute). The
# stamp lies in lib/: uv sync removes files it does not know from .venv/ itself.
stamp=$(sha256sum uv.lock | cut -c1-16)
if [ "$(cat .venv/lib/.ptb-bytecode 2>/dev/null)" != "$stamp" ]; then
    log "compiling .venv's bytecode"
    # A few files in packages' test data are not Python 3 source: their errors are expected.
    .venv/bin/python -m compileall -q -j0 .venv/lib >/dev/null 2>&1 || true
    echo "$stamp" > .venv/lib/.ptb-bytecode
fi
.venv/bin/python -m compileall -q src >/dev/null 2>&1 || true
log "ready: .venv/bin/ptb"
