# Two commands do everything on a fresh machine: `make demo` and `make test`.
.PHONY: setup demo test test-fast test-parity lint docker

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

# The unit tests that start no sandbox and build no environment: for a change to one module.
test-fast: setup
	HARBOR_TELEMETRY=0 .venv/bin/python -m pytest -m "not slow and not docker and not environment" -n auto --dist loadgroup -q -p no:cacheprovider tests/unit

# PostTrainBench's own evaluate.py and ours on the same questions, verdict by verdict
# (CPU, SmolLM2-135M; about 15 minutes a benchmark on 2 cores; docs/parity.md).
test-parity: setup
	bash scripts/task_venv.sh
	HARBOR_TELEMETRY=0 PYTHONPATH=src .venv-task/bin/python -m pytest -m ptb_agreement -q -p no:cacheprovider tests/task
