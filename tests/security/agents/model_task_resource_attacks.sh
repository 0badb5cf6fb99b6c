# Resource attacks of a hostile agent on a model task (issue 15), run as the agent's user:
# a final_model of 1 TiB that takes no disk (a sparse file), and logs that would fill the
# host's disk or hang a reader (a 1 GiB sparse file, a FIFO). Prints key=value lines.
set -u
mkdir -p /app/final_model
cp /opt/ptb/models/base/*.json /app/final_model/ 2>/dev/null
truncate -s 1T /app/final_model/model.safetensors
echo "final_model_apparent=$(du -s --apparent-size --block-size=1 /app/final_model | cut -f1)"
echo "final_model_allocated=$(du -s --block-size=1 /app/final_model | cut -f1)"
truncate -s 1G /logs/agent/huge.jsonl
mkfifo /logs/agent/pipe.jsonl
echo "done=yes"
