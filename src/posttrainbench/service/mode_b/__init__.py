"""Mode B: a candidate is a Harbor agent class, scored by nested Harbor trials inside the
task, each in an environment reset before its verifier runs."""
