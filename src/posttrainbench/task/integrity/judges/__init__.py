"""Judges that decide, after the agent ends, whether a run broke the rules."""
