"""Agent-optimization tasks: typed config, budget ledger, candidate store, trusted scorer,
the budgeted evaluation service and the trusted final scoring."""
