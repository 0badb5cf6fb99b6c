"""Sweeps: benchmarks x base models x agents x attempts as one resumable Harbor job."""
