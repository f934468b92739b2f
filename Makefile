# tbdtrace developer entry points. Every target bootstraps what it needs on first use,
# from the package registries, with pinned versions (requirements.lock).
#   make demo    capture/import a real trace and print its report (the main job)
#   make test    build everything and run all tests
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP_QUIET := --quiet --disable-pip-version-check --no-warn-script-location

.PHONY: all venv venv-mxnet bench-venv native test demo lint format docs clean

all: native

$(VENV)/.stamp: requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) -r requirements.lock 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	touch $@

venv: $(VENV)/.stamp

# MXNet 1.9.1 needs numpy<1.24, so its workloads get their own venv. Its wheel bundles
# OpenBLAS and libgfortran but links the system's libgomp and libquadmath (Debian
# packages libgomp1, libquadmath0): installed with apt-get when missing.
VENV_MX := .venv-mxnet
$(VENV_MX)/.stamp: requirements-mxnet.lock
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; install Python 3.11"; exit 1; }
	@if ! /sbin/ldconfig -p | grep -q 'libgomp.so.1 ' || ! /sbin/ldconfig -p | grep -q 'libquadmath.so.0 '; then \
	  echo "make: installing libgomp1 libquadmath0 (needed by MXNet)"; \
	  apt-get update -qq && apt-get install -y -qq libgomp1 libquadmath0 >/dev/null \
	  || { echo "make: MXNet needs libgomp1 and libquadmath0; install them (as root: apt-get install libgomp1 libquadmath0)"; exit 1; }; \
	fi
	$(PYTHON) -m venv $(VENV_MX)
	$(VENV_MX)/bin/python -m pip install $(PIP_QUIET) --no-deps -r requirements-mxnet.lock 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	$(VENV_MX)/bin/python -c "import mxnet; mxnet.nd.ones((1,)).asnumpy()"
	touch $@

venv-mxnet: $(VENV_MX)/.stamp

# HTA (the benchmarks' baseline, bench/import_vs_hta.py) in its own venv; not part of test.
VENV_BENCH := .venv-bench
$(VENV_BENCH)/.stamp:
	$(PYTHON) -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/python -m pip install $(PIP_QUIET) holistictraceanalysis==0.5.0
	$(VENV_BENCH)/bin/python -c "from hta.trace_analysis import TraceAnalysis"
	touch $@

bench-venv: $(VENV_BENCH)/.stamp

# The pybind11 extension and the CUPTI injection library, built in place by CMake.
# The package is installed editable into .venv (console script `tbdtrace`).
native: $(VENV)/.stamp
	if [ -f setup.py ]; then $(PY) setup.py -q build_ext --inplace; fi
	$(PY) -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	$(PY) -m compileall -q tbdtrace  # bytecode even where PYTHONDONTWRITEBYTECODE is set

test: native $(VENV_MX)/.stamp
	$(PY) -m pytest -q tests

# The main job: ResNet-50 training on PyTorch under capture (the GPU with the CUPTI
# collector when one is usable, else the CPU with torch.profiler), then its report.
DEMO_OUT ?= out/demo-resnet50
# tiny on a CPU (seconds per step); small on a GPU.
DEMO_SIZE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo small || echo tiny)
demo: native
	$(PY) -m tbdtrace capture --force --out $(DEMO_OUT) -- $(PY) -m workloads.pytorch.resnet50 --size $(DEMO_SIZE) --steps 3 --warmup 1
	$(PY) -m tbdtrace report $(DEMO_OUT) --top 15

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
