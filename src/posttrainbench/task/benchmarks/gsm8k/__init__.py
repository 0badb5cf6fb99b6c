"""GSM8K: grade-school math word problems, as PostTrainBench's ``inspect_evals/gsm8k``."""
