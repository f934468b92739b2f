# tbdtrace developer entry points. Every target bootstraps what it needs on first use,
# from the package registries, with pinned versions (requirements.lock).
#   make demo    capture/import a real trace and print its report (the main job)
#   make test    build everything and run all tests
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP_QUIET := --quiet --disable-pip-version-check --no-warn-script-location

.PHONY: all venv native test demo lint format docs clean

all: native

$(VENV)/.stamp: requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) -r requirements.lock 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	touch $@

venv: $(VENV)/.stamp

# The pybind11 extension and the CUPTI injection library, built in place by CMake.
native: $(VENV)/.stamp
	$(PY) setup.py -q build_ext --inplace

test: native
	$(PY) -m pytest -q tests

demo: native
	$(PY) -m tbdtrace import tests/data/kineto/hta/step_based_trace_2543932.json.gz --out out/demo-trace
	$(PY) -m tbdtrace report out/demo-trace

lint: $(VENV)/.stamp
	$(PY) -m ruff check tbdtrace tests workloads bench
	$(PY) -m ruff format --check tbdtrace tests workloads bench
	$(PY) -m mypy

format: $(VENV)/.stamp
	$(PY) -m ruff format tbdtrace tests workloads bench

docs: $(VENV)/.stamp
	$(PY) -c "import sys, tbdtrace.schema as s; sys.stdout.write(s.render_markdown())" > docs/TRACE_FORMAT.md

clean:
	rm -rf build out tbdtrace/*.so
