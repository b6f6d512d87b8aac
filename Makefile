# statebox: `make demo` runs the main job on the built-in suite; `make test` runs the tests.
# Setup is split into ordered, idempotent steps in scripts/setup/ (each owns one thing).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python

.PHONY: setup demo test perf clean

setup:
	@set -e; for step in scripts/setup/[0-9]*.sh; do \
	  echo "== setup: $$step"; bash "$$step"; \
	done

demo: setup
	$(VENV)/bin/statebox demo

test: setup
	$(PY) -m pytest -q tests

perf: setup
	@set -e; for p in perf/*.py; do echo "== $$p"; $(PY) "$$p"; done

clean:
	rm -rf $(VENV) build *.egg-info
