#!/usr/bin/env bash
# Logs GPU, CPU, memory and disk use every PTB_MONITOR_INTERVAL seconds (default 60).
set -u
log=/logs/agent/system_monitor.log
interval="${PTB_MONITOR_INTERVAL:-60}"
while true; do
    {
        echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "load: $(cat /proc/loadavg 2>/dev/null)"
        free -m 2>/dev/null | sed -n '1,2p'
        df -h /app 2>/dev/null | tail -n 1
        if command -v nvidia-smi >/dev/null 2>&1; then
            nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total \
                --format=csv,noheader 2>&1
        else
            echo "gpu: none"
        fi
    } >> "$log" 2>&1
    sleep "$interval"
done
