"""Host-side data preparation: benchmark test sets and base models into a cache."""
