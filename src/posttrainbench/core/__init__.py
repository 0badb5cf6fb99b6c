"""The core zone: shipped in every task (model tasks, agent tasks) and used on the host.

Errors, atomic writes, the trial outcome, the task layouts, the no-follow file
primitives, Landlock and the syscall filter. It imports nothing else of this package.
"""
