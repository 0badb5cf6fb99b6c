#!/bin/sh
# Run as root inside a Mode B inner task's environment by the trusted proxy, before the
# candidate starts ("snapshot") and after it ends ("sweep KEEP..."): nothing the candidate
# started may still run when the task's verifier does (a daemon rewriting the reward file
# would otherwise set its score). Processes are named "pid:starttime", so a pid reused
# since the snapshot is not spared. POSIX sh and builtins only: no child of this script
# appears in what it scans, and it runs on any image.
set -u
me=$$

# The pid's "state ppid starttime" from /proc/PID/stat (fields 3, 4 and 22), or nothing.
stat_of() {
    { read -r line < "/proc/$1/stat"; } 2>/dev/null || return 1
    rest=${line##*) }
    # shellcheck disable=SC2086  # split into fields on purpose
    set -- $rest
    state=$1
    ppid=$2
    shift 19
    start=$1
}

# This script and its ancestors inside the environment (the exec that started it).
spared=" $me "
pid=$me
while stat_of "$pid" && [ "$ppid" -gt 1 ]; do
    spared="$spared$ppid "
    pid=$ppid
done

others() {
    for dir in /proc/[0-9]*; do
        pid=${dir#/proc/}
        case "$spared" in *" $pid "*) continue ;; esac
        stat_of "$pid" || continue
        [ "$ppid" = "$me" ] && continue  # this script's own subshells
        [ "$state" = Z ] && continue  # exited already, waiting to be reaped
        echo "$pid:$start"
    done
}

case "${1:-}" in
snapshot)
    others
    ;;
sweep)
    shift
    keep=" $* "
    victims=" "
    # Freeze first, until a round finds nothing new: a stopped process cannot fork.
    round=0
    while [ "$round" -lt 20 ]; do
        found=0
        for entry in $(others); do
            case "$keep" in *" $entry "*) continue ;; esac
            case "$victims" in *" ${entry%%:*} "*) continue ;; esac
            kill -STOP "${entry%%:*}" 2>/dev/null || continue
            victims="$victims${entry%%:*} "
            found=1
        done
        [ "$found" = 0 ] && break
        round=$((round + 1))
    done
    for pid in $victims; do
        kill -KILL "$pid" 2>/dev/null
    done
    left=0
    for entry in $(others); do
        case "$keep" in *" $entry "*) continue ;; esac
        case "$victims" in *" ${entry%%:*} "*) ;; *) left=$((left + 1)) ;; esac
    done
    echo "killed $(echo $victims | wc -w) left $left"
    [ "$left" = 0 ]
    ;;
*)
    echo "usage: environment_sweep.sh snapshot | sweep PID:START..." >&2
    exit 2
    ;;
esac
