"""`python -m posttrainbench.task.integrity.contamination`: see command.main."""

import sys

from posttrainbench.task.integrity.contamination.command import main

sys.exit(main())
