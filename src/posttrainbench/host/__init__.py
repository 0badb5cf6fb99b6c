"""The host zone: what runs only on the researcher's machine (CLI, compilers, sweeps,
environments, results). It may import every other zone; nothing imports it.
"""
