"""Scripts that run inside a task sandbox (stdlib only, Python >= 3.11)."""
