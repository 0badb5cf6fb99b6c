"""The training curve an agent's own output shows: its loss by step, for the run page.

Read from the text of the run's trace or plain log (display only, never a score), in the
two shapes training loops print most: a line naming a step and a loss (``step 10 loss
0.187``, ``Step 10/200 | loss: 0.19``: custom loops, this project's reference fine-tune)
and the Hugging Face Trainer's log dicts (``{'loss': 0.5, ..., 'epoch': 0.4}``, by epoch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Inside a JSON trace, a tool's output is a string: its quotes arrive escaped (\').
_STEP_LOSS = re.compile(
    r"\bstep[\s:=]*(\d+)(?:\s*/\s*\d+)?\b[^\n\\]{0,80}?\bloss[\s:=]+(\d+(?:\.\d+)?(?:e-?\d+)?)",
    re.IGNORECASE,
)
_TRAINER_LOG = re.compile(
    r"\{\\?'loss\\?': (\d+(?:\.\d+)?(?:e-?\d+)?)[^{}]{0,400}?\\?'epoch\\?': (\d+(?:\.\d+)?)"
)
MAX_POINTS = 400


@dataclass(frozen=True)
class TrainingCurve:
    """Loss points in the order the agent printed them, and what their x is."""

    x_label: str  # "step" or "epoch"
    points: list[tuple[float, float]]


def training_curve(text: str) -> TrainingCurve | None:
    """The loss curve in *text* (the shape with more points wins); None below two points."""
    steps = [(float(m.group(1)), float(m.group(2))) for m in _STEP_LOSS.finditer(text)]
    epochs = [(float(m.group(2)), float(m.group(1))) for m in _TRAINER_LOG.finditer(text)]
    x_label, points = ("step", steps) if len(steps) >= len(epochs) else ("epoch", epochs)
    if len(points) < 2:
        return None
    every = -(-len(points) // MAX_POINTS)  # keep at most MAX_POINTS, evenly
    return TrainingCurve(x_label, points[::every])
