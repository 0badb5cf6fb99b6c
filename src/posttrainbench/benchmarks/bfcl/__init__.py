"""BFCL v4 ``simple_python``: data from the ``bfcl-eval`` package, AST scoring."""
