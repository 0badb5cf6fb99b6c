"""N-gram contamination checks of training data against a benchmark's test set."""
