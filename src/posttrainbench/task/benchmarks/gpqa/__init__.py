"""GPQA main: 448 graduate-level science multiple-choice questions, choices shuffled by seed."""
