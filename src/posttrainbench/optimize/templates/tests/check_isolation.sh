#!/usr/bin/env bash
# Prints JSON {"control": <USER can read its own repo: expected true>, "protected":
# {path: <USER can read it: expected false>}}; the control shows the probe itself works.
# Usage: check_isolation.sh USER STATE_DIR PRIVATE_DIR REPO [EXTRA_PROTECTED_PATH...]
set -u
user=$1 state=$2 private=$3 repo=$4
shift 4
gid=$(id -g "$user")
if setpriv --reuid="$user" --regid="$gid" --clear-groups -- ls "$repo" >/dev/null 2>&1; then
    printf '{"control": true, "protected": {'
else
    printf '{"control": false, "protected": {'
fi
first=1
for path in "$state/state/admin_token" "$state/state/ledger.json" "$state/state/candidates.json" \
            "$private/task.yaml" "$private/data" "$@"; do
    if [ -d "$path" ]; then probe=(ls "$path"); else probe=(cat "$path"); fi
    if setpriv --reuid="$user" --regid="$gid" --clear-groups -- "${probe[@]}" >/dev/null 2>&1; then
        readable=true
    else
        readable=false
    fi
    [ $first = 1 ] || printf ', '
    first=0
    printf '"%s": %s' "$path" "$readable"
done
printf '}}\n'
