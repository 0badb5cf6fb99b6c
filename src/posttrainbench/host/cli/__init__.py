"""The `ptb` command line: one module per command group."""
