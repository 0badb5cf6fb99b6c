"""BFCL ``exec_simple`` as PostTrainBench runs it: inspect_evals' task, hermes tool calls."""
