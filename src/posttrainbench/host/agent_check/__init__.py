"""`ptb agents check`: a real agent CLI in a real trial against the scripted model.

Before a researcher spends money on a sweep, this runs the CLI the way a sweep would
(install, auth, the agent's run, trace parsing, final_model hand-off, verifier, judges,
secret scrubbing) with a scripted model instead of a paid API, and says which stage
failed and why.
"""

from pathlib import Path

CHECKS_DIR = Path("ptb-checks")  # not the runs dir: a check is not an agent run to export
