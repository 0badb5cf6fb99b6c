"""Mode A: a candidate is a command, scored on question/answer samples by the trusted scorer."""
