#!/usr/bin/env bash
# Checks, with the network, that the GPU image's pins (src/posttrainbench/host/tasks/data/
# gpu_image.json) install together: pip resolves the pins plus the task requirements a
# GPU task keeps, as binary wheels for the image's platform and Python, and every npm
# pin exists. Prints OK, or what failed. Not run by the tests (they are offline).
#
#   scripts/check_gpu_pins.sh            # uses .venv/bin/python (pip >= 25)
#   PYTHON=/path/to/python scripts/check_gpu_pins.sh
set -euo pipefail
source "$(dirname "$0")/lib/help.sh"
print_help_if_asked "$0" "$@"
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
pins() { "$python" -m posttrainbench.host.tasks.gpu_image "$1"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
{ pins requirements; pins pip; } > "$work/requirements.txt"
platform_args=()
while read -r tag; do platform_args+=(--platform "$tag"); done < <(pins platforms)

# --isolated: the registry's own answer, not a local pip configuration's (constraints,
# local wheel folders). --dry-run with --report resolves from package metadata only.
status=0
if ! "$python" -m pip --isolated install --dry-run --ignore-installed --quiet \
        --only-binary=:all: "${platform_args[@]}" --implementation cp \
        --python-version "$(pins python)" \
        --report "$work/report.json" -r "$work/requirements.txt" > "$work/pip.log" 2>&1; then
    echo "FAIL: the pip pins do not resolve together:"
    grep -v '^\[notice\]' "$work/pip.log" | tail -n 20
    status=1
else
    count="$("$python" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["install"]))' "$work/report.json")"
    echo "pip: the $(grep -c "==" "$work/requirements.txt") pinned requirements of a GPU task resolve together ($count wheels)"
fi

while read -r spec; do
    name="${spec%@*}"
    want="${spec##*@}"
    got="$(npm view "$spec" version 2>/dev/null | tail -n 1 || true)"
    if [ "$got" != "$want" ]; then
        echo "FAIL: npm $name has no release $want (npm view printed: ${got:-nothing})"
        status=1
    fi
done < <(pins npm)

[ "$status" -eq 0 ] && echo OK
exit "$status"
