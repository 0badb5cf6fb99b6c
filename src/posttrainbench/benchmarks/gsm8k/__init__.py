"""GSM8K: grade-school math word problems, scored with lm-eval-harness's numeric extraction."""
