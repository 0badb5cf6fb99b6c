"""`python -m posttrainbench.integrity.contamination`: see command.main."""

import sys

from posttrainbench.integrity.contamination.command import main

sys.exit(main())
