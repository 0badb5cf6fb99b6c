"""Run compiled tasks through Harbor's Job API and record what happened."""
