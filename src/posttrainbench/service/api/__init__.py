"""The budgeted evaluation service the agent calls: its HTTP app, ledger, gate and summary,
and the one place that chooses Mode A or Mode B (``scoring``)."""
