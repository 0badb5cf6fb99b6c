"""Compile (benchmark, base model) pairs into Harbor task directories."""
