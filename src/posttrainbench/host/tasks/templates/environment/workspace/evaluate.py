"""Score a model directory on this task's benchmark.

Usage, as PostTrainBench's evaluate.py: python evaluate.py [--model-path final_model]
    [--limit N] [--json-output-file FILE] [--templates-dir templates/] [--max-tokens N]
    [--max-connections N] [--gpu-memory-utilization F]   (--limit -1: every question)

This is the agent-facing copy. Changing it changes nothing about your final score:
the final evaluation runs its own sealed copy in a separate environment.
"""

import os
import runpy
import sys

if __name__ == "__main__":
    root = os.environ.get("PTB_ROOT", "/opt/ptb")
    sys.path.insert(0, os.path.join(root, "lib"))
    sys.argv = [sys.argv[0], "--task", os.path.join(root, "task.json"), *sys.argv[1:]]
    runpy.run_module("posttrainbench.task.evaluation.evaluate", run_name="__main__")
