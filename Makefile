# statebox: `make demo` runs the main job on the built-in suite; `make test` runs the tests
# (`make test-fast`: only those that need no Docker engine). Both run in parallel on 4 pytest-xdist
# workers, more than this 2-core machine's cores as most tests wait on Docker and the CLIs;
# `--dist loadgroup` keeps the tests sharing a fixture or state on one worker (tests/xdist_groups.py).
# Setup is split into idempotent steps in scripts/setup/ (each owns one thing); scripts/setup/run.sh
# runs them in phases, independent steps side by side, and prints one timing line per step.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: setup demo test test-fast typecheck perf clean

setup:
	@bash scripts/setup/run.sh

demo: setup
	@started=$$(date +%s); $(VENV)/bin/statebox demo; rc=$$?; \
	  echo "demo timing: statebox demo $$(( $$(date +%s) - started ))s (exit $$rc)"; exit $$rc

PARALLEL := -n 4 --dist loadgroup

test: setup
	$(PY) -m pytest -q $(PARALLEL) --durations=30 tests

# the tests that need no Docker engine: every engine test carries the `docker` mark (tests/conftest.py checks it)
test-fast: setup
	$(PY) -m pytest -q $(PARALLEL) -m "not docker" tests

# mypy (pyproject [tool.mypy]: the whole package, strict flags for the seams) and the layer contracts
# (pyproject [tool.importlinter], docs/architecture.md "Layer rules")
typecheck: setup
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

perf: setup
	@set -e; for p in perf/*.py; do echo "== $$p"; $(PY) "$$p"; done

clean:
	rm -rf $(VENV) build *.egg-info
