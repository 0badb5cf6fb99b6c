#!/usr/bin/env bash
# The system monitor, root's: GPU, CPU, memory and disk use every PTB_MONITOR_INTERVAL
# seconds (default 60) into /logs/artifacts/system_monitor.log, a root-owned file in a
# root-owned 0755 directory that Harbor downloads with the trial (artifacts/logs/artifacts/).
# The agent can read the log but neither write, replace nor delete it, and cannot signal
# the sampler (another uid; on the local sandbox it does not even see it in /proc). The
# sampler follows no path the agent can write: it appends to its own log and reads /proc,
# `free`, `df` (statfs of /app, which the agent owns but cannot replace) and `nvidia-smi`.
#   monitor.sh start   start.sh, before the agent: starts the sampler, detached, and returns
#                      once its first sample is in the log.
#   monitor.sh final   collect.sh, after the agent's processes are dead: the sampler takes one
#                      last sample, marked "(after the agent)", and exits; if it is not
#                      running, the log says so instead.
set -u
cd /
export PATH=/usr/bin:/bin
LOG=/logs/artifacts/system_monitor.log
ME=/opt/ptb/monitor.sh
FINAL_MARK="(after the agent)"

sample() {
    {
        echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ)${1:+ $1}"
        echo "load: $(cat /proc/loadavg 2>/dev/null)"
        free -m 2>/dev/null | sed -n '1,2p'
        df -h /app 2>/dev/null | tail -n 1
        if command -v nvidia-smi >/dev/null 2>&1; then
            nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total \
                --format=csv,noheader 2>&1
        else
            echo "gpu: none"
        fi
    } >> "$LOG" 2>&1
}

# Pids of root's running samplers: only root's processes count, so no process of the
# agent's (which may name itself anything) is ever signalled or taken for the sampler.
samplers() {
    local dir cmdline
    for dir in /proc/[0-9]*; do
        [ "$(stat -c %u "$dir" 2>/dev/null)" = 0 ] || continue
        cmdline=$(tr '\0' ' ' < "$dir/cmdline" 2>/dev/null) || continue
        [ "$cmdline" = "bash $ME run " ] && echo "${dir#/proc/}"
    done
}

run() {
    local interval="${PTB_MONITOR_INTERVAL:-60}" final= nap
    trap 'final=1' USR1
    while true; do
        sample "${final:+$FINAL_MARK}"
        [ -n "$final" ] && exit 0
        sleep "$interval" & nap=$!
        [ -n "$final" ] || wait "$nap"  # a USR1 ends the wait at once
        kill "$nap" 2>/dev/null
    done
}

case "${1:-}" in
    start)
        [ -n "$(samplers)" ] && exit 0
        (umask 022 && : >> "$LOG")
        setsid env -i PATH="$PATH" PTB_MONITOR_INTERVAL="${PTB_MONITOR_INTERVAL:-60}" \
            nohup bash "$ME" run >/dev/null 2>&1 < /dev/null &
        for _ in $(seq 1 50); do  # its first sample is in the log before the agent starts
            [ -s "$LOG" ] && exit 0
            sleep 0.1
        done
        ;;
    final)
        pids=$(samplers)
        if [ -z "$pids" ]; then
            echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) the monitor was not running at the end of the agent's run" >> "$LOG"
            exit 0
        fi
        # Sent again each second: a signal landing between the sampler's check and its wait
        # would otherwise wait out a whole interval.
        for _ in $(seq 1 10); do
            # shellcheck disable=SC2086  # one pid per word
            kill -USR1 $pids 2>/dev/null
            for _ in $(seq 1 10); do
                [ -z "$(samplers)" ] && exit 0
                sleep 0.1
            done
        done
        echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) the monitor did not answer at the end of the agent's run" >> "$LOG"
        ;;
    run)
        run
        ;;
    *)
        echo "usage: monitor.sh start|final|run" >&2
        exit 2
        ;;
esac
