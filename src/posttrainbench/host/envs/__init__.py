"""Harbor environment plugins: the local bubblewrap sandbox."""
