#!/usr/bin/env bash
# Healthcheck hook: runs right before the agent is set up. Records when the agent's
# clock starts (once) and starts the system monitor in its own session.
set -u
# The base model must be in place before the clock starts (a task reading it from the
# shared cache volume links it here; a missing one fails the start, not the agent).
if [ -f /opt/ptb/base_model.sh ]; then
    bash /opt/ptb/base_model.sh || exit 1
fi
mkdir -p /logs/agent
stamp=/logs/agent/ptb_start_time
if [ ! -s "$stamp" ]; then
    date +%s > "$stamp"
fi
if [ ! -s /logs/agent/system_monitor.pid ] || ! kill -0 "$(cat /logs/agent/system_monitor.pid)" 2>/dev/null; then
    setsid nohup bash /opt/ptb/monitor.sh >/dev/null 2>&1 < /dev/null &
    echo $! > /logs/agent/system_monitor.pid
fi
exit 0
