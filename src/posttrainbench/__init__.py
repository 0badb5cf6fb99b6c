"""PostTrainBench: measure how well AI agents post-train base LLMs.

Kept free of imports: this package is also copied into task sandboxes.
"""

__version__ = "0.1.0"
