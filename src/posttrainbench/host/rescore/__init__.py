"""`ptb rescore`: the current verifier and judges on stored models, without re-running agents."""
