# Two commands do everything on a fresh machine: `make demo` and `make test`.
.PHONY: setup demo test test-fast lint docker

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/ptb demo

# All tiers this machine can run: unit, slow (real trials), docker (starts an engine).
test: setup
	bash scripts/test.sh

# ruff (lint + format), the import contracts and the type-check ratchet.
lint: setup
	bash scripts/lint.sh

test-fast: setup
	HARBOR_TELEMETRY=0 .venv/bin/python -m pytest -m "not slow and not docker" -q --ignore=tests/task
