#!/usr/bin/env bash
# Check your training data for overlap with the benchmark's test set (cl100k n-grams:
# question 5, answer 3, passage 4; threshold 0.8) before you train on it:
#   bash /app/check_contamination.sh --input data.jsonl [more files or dirs] [--json]
# Exit status: 0 clean, 1 contaminated (the matching records are listed), 2 bad input.
# The reference defaults to the test items this task shows you (test feedback mode);
# pass --reference TEST.json (a JSON array of {"question", "answer"}) to use another.
if [ -s /opt/ptb/data/contamination_reference.json ]; then
    export PTB_CONTAMINATION_REFERENCE=${PTB_CONTAMINATION_REFERENCE:-/opt/ptb/data/contamination_reference.json}
fi
export PTB_TIKTOKEN_DIR=/opt/ptb/tiktoken
exec env PYTHONPATH=/opt/ptb/lib /opt/ptb/venv/bin/python -m posttrainbench.task.integrity.contamination "$@"
