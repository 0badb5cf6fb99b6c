"""AIME 2025: 30 competition problems with integer answers 0..999."""
