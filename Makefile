# tbdtrace developer entry points. Every target bootstraps what it needs on first use,
# from the package registries, with pinned versions (requirements.lock).
#   make demo    capture/import a real trace and print its report (the main job)
#   make test    build everything and run all tests
#   make test-quick   the edit-test loop: every test that needs no training run, capture,
#                process cluster or browser (pytest -m "not heavy"; DECISIONS 185)
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP_QUIET := --quiet --disable-pip-version-check --no-warn-script-location

.PHONY: all venv venv-mxnet bench-venv native chromium test test-quick robustness perf-gate fuzz demo lint format docs clean sanitize gpu-wheels

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
# pandas < 3: HTA 0.5.0's critical-path analysis calls DataFrame.drop(axis=, columns=),
# which pandas 3 refuses (bench/critical_path_vs_hta.py).
VENV_BENCH := .venv-bench
$(VENV_BENCH)/.stamp:
	$(PYTHON) -m venv $(VENV_BENCH)
	$(VENV_BENCH)/bin/python -m pip install $(PIP_QUIET) holistictraceanalysis==0.5.0 "pandas>=2.2,<3"
	$(VENV_BENCH)/bin/python -c "from hta.trace_analysis import TraceAnalysis"
	touch $@

bench-venv: $(VENV_BENCH)/.stamp

# The pybind11 extension and the CUPTI injection library, built in place by CMake.
# The package is installed editable into .venv (console script `tbdtrace`).
# The spool's CRC-32 comes from ISA-L (Debian libisal-dev), installed with apt-get when
# missing; without it the build falls back to zlib's CRC (same values, slower).
native: $(VENV)/.stamp
	@if [ ! -f /usr/include/isa-l/crc.h ]; then \
	  echo "make: installing libisal-dev (the spool's CRC-32)"; \
	  (apt-get install -y -qq libisal-dev >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq libisal-dev >/dev/null 2>&1)) \
	  || echo "make: libisal-dev not installed (as root: apt-get install libisal-dev); the spool's CRC-32 uses zlib"; \
	fi
	if [ -f setup.py ]; then $(PY) setup.py -q build_ext --inplace; fi
	$(PY) -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v '^WARNING: Location' ; test $${PIPESTATUS[0]} -eq 0
	$(PY) -m compileall -q tbdtrace  # bytecode even where PYTHONDONTWRITEBYTECODE is set

# The collector's lifecycle through the fake CUPTI (csrc/testing/seam_test.cpp) under
# AddressSanitizer + UBSan, then ThreadSanitizer: one process per scenario. Not part of
# `test` (two instrumented builds). failed_start leaks the pool CUPTI still holds on
# purpose, so LeakSanitizer is off for that one scenario only. column_blocks: the column
# core's mapped buffers and prefault thread, written from two threads.
SEAM_SCENARIOS := periodic burst exhaustion buffers stop_during_flush second_start failed_start pause_resume sigterm sigint \
  column_blocks
# Then _native (the Kineto parser's bindings, the interval search, the Perfetto encoder, the
# JSON writer) under ASan + UBSan, through the tests that call it (-s: a report is printed
# before the abort, not captured).
SANITIZED_TESTS := tests/report/test_json_text.py tests/importers/test_kineto_parser.py \
  tests/importers/test_kineto_threads.py \
  tests/importers/test_kineto_stream.py tests/importers/test_kineto.py tests/native/test_kineto_layout.py \
  tests/analysis/engine/test_intervals_covered.py tests/export/test_export.py
SAN_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
sanitize:
	set -e; export PATH="$(CURDIR)/$(VENV)/bin:$$PATH"; for san in address thread; do \
	  cmake -S . -B build/sanitize-$$san -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	    -DTBDTRACE_SANITIZE=$$san -DTBDTRACE_TESTING=ON -DPython_EXECUTABLE=$(CURDIR)/$(PY) >/dev/null; \
	  cmake --build build/sanitize-$$san --target tbdtrace_seam_test; \
	  for s in $(SEAM_SCENARIOS); do \
	    d=$$(mktemp -d); leaks=1; [ $$s = failed_start ] && leaks=0; \
	    $(SAN_ENV) ASAN_OPTIONS=detect_leaks=$$leaks:abort_on_error=1 \
	      build/sanitize-$$san/tbdtrace_seam_test $$s $$d || { echo "sanitize: $$san $$s failed"; exit 1; }; \
	    rm -rf $$d; \
	  done; \
	done
	cmake --build build/sanitize-address --target _native
	rm -rf build/sanitize-address/pkg && mkdir -p build/sanitize-address/pkg
	cp -rs $(CURDIR)/tbdtrace build/sanitize-address/pkg/  # links to this checkout's files
	rm -f build/sanitize-address/pkg/tbdtrace/_native.*.so  # a link: replaced, never written through
	cp build/sanitize-address/_native.*.so build/sanitize-address/pkg/tbdtrace/
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 $(SAN_ENV) \
	  $(PY) tests/native/run_sanitized.py build/sanitize-address/pkg -q -s -p no:cacheprovider \
	  $(SANITIZED_TESTS) || { echo "sanitize: _native under ASan/UBSan failed"; exit 1; }
	echo "sanitize: all scenarios clean under ASan/UBSan and TSan; _native's tests clean under ASan/UBSan"

# The GPU machine has Python 3.12 and no package index: the GPU check's cupti-python oracle
# (tests/gpu/cupti_oracle.py) needs these cp312 wheels carried in the tree (wheels/gpu,
# ignored by git); scripts/gpu_check.sh installs them into $$OUT/site when missing there.
GPU_WHEELS := wheels/gpu
gpu-wheels: $(VENV)/.stamp
	$(PY) -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps -d $(GPU_WHEELS) \
	  --python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64 \
	  --platform manylinux_2_28_x86_64 \
	  $$(grep -E '^(cupti-python|cuda-bindings|cuda-pathfinder)==' requirements.lock)
	ls $(GPU_WHEELS)

# The HTML report's browser test (tests/report/test_html.py) runs headless Chromium
# (Debian package chromium): installed with apt-get when missing; where that fails, the
# test is skipped with the reason.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "make: installing chromium (the HTML report's browser test)"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
	  || echo "make: chromium not installed (as root: apt-get install chromium); the browser test will be skipped"; }

# Two worker processes or more (pytest-xdist): the tests wait mostly on training and
# capture subprocesses, so even 2 cores run two at once. --dist loadfile keeps each test
# file in one worker, so a module- or session-scoped trace it builds is built once.
# A worker that crashes can leave xdist waiting for ever: after 40 minutes the run is
# interrupted (SIGINT), so it still prints its summary and fails.
test: native $(VENV_MX)/.stamp chromium
	timeout -s INT 2400 $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=25 -m "not robustness" tests

# The slow robustness classes (tests marked robustness: every rewrite of a trace killed at
# each file operation it makes, through a fault-injection library built with cc; hostile
# sizes, gigabytes of content under a 4 GiB address-space limit), which .ci/run runs after
# make test: ~3 CPU minutes, ~6 on a loaded two-core machine.
robustness: native
	timeout -s INT 1800 $(PY) -m pytest -q -n auto --maxprocesses 2 --durations=10 -m robustness tests/robustness

# The performance gate (bench/perf_gate.py): report FILE on the largest Kineto fixture and
# on a generated 1M-kernel file against a floor measured in the same run, as ratios with
# their budgets; .ci/run runs it. The import budget is tests/perf/test_import_budget.py.
perf-gate: native
	$(PY) bench/perf_gate.py --runs 9 --kernels 1000000 --synthetic-runs 5

# The quick tier: tests not marked `heavy` (no training run, capture, workload, process
# cluster, browser or C++ build); at most 2 minutes on two quiet cores. TBDTRACE_TEST_QUICK=1
# arms the guard in tests/conftest.py that fails an unmarked test starting such a process.
test-quick: native
	TBDTRACE_TEST_QUICK=1 timeout -s INT 600 $(PY) -m pytest -q -n auto --dist loadfile -m "not heavy" --durations=10 tests

# Coverage-guided fuzzing of the C++ Kineto parser (libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer; tests/robustness/fuzz/), for FUZZ_SECONDS; not part of test.
# The corpus is seeded from the fixture traces and the hostile-input cases and grows in
# build/fuzz/corpus between runs; a finding is written to build/fuzz/crash-* (or leak-*,
# timeout-*) and the run fails. clang and libFuzzer come from Debian when missing.
FUZZ_SECONDS ?= 120
FUZZ_DIR := build/fuzz
FUZZ_CXX = $$(command -v clang++-14 || command -v clang++)
fuzz: $(VENV)/.stamp
	@if ! command -v clang++-14 >/dev/null && ! command -v clang++ >/dev/null; then \
	  echo "make: installing clang-14 libclang-rt-14-dev (libFuzzer)"; \
	  apt-get update -qq && apt-get install -y -qq clang-14 libclang-rt-14-dev >/dev/null \
	  || { echo "make: fuzz needs clang with libFuzzer; install clang-14 libclang-rt-14-dev"; exit 1; }; \
	fi
	mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_CXX) -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -Icsrc csrc/common/column_core.cpp csrc/kineto/*.cpp \
	  tests/robustness/fuzz/kineto_parser_fuzz.cpp -o $(FUZZ_DIR)/kineto_parser_fuzz
	PYTHONPATH=$(CURDIR) $(PY) tests/robustness/fuzz/seed_corpus.py $(FUZZ_DIR)/corpus $(FUZZ_DIR)/routes.txt
	TBDTRACE_FUZZ_ROUTES=$(FUZZ_DIR)/routes.txt $(FUZZ_DIR)/kineto_parser_fuzz \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	  -dict=tests/robustness/fuzz/kineto.dict \
	  -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 $(FUZZ_DIR)/corpus

# The main job: ResNet-50 training on PyTorch under capture (the GPU with the CUPTI
# collector when one is usable, else the CPU with torch.profiler), then its report.
DEMO_OUT ?= out/demo-resnet50
# tiny on a CPU (seconds per step); small on a GPU.
DEMO_SIZE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo small || echo tiny)
demo: native
	$(PY) -m tbdtrace capture --force --out $(DEMO_OUT) -- $(PY) -m workloads.pytorch.resnet50 --size $(DEMO_SIZE) --steps 3 --warmup 1
	$(PY) -m tbdtrace report $(DEMO_OUT) --top 15

# The style gates (.ci/run runs them before the tests): ruff lint and format, mypy on the
# package, clang-format on the C++ (pinned in requirements.lock), and stubtest of the
# extension's .pyi against the built module.
CXX_SOURCES = $(sort $(wildcard $(foreach d,csrc csrc/collector csrc/common csrc/kineto csrc/testing,$(d)/*.cpp $(d)/*.h)))
PY_SOURCES = tbdtrace tests workloads bench scripts
lint: native
	$(PY) -m ruff check $(PY_SOURCES)
	$(PY) -m ruff format --check $(PY_SOURCES)
	$(PY) -m mypy
	$(VENV)/bin/clang-format --dry-run -Werror $(CXX_SOURCES)
	$(PY) -m mypy.stubtest tbdtrace._native --mypy-config-file pyproject.toml --allowlist .stubtest-allowlist

format: $(VENV)/.stamp
	$(PY) -m ruff format $(PY_SOURCES)
	$(VENV)/bin/clang-format -i $(CXX_SOURCES)

docs: $(VENV)/.stamp
	$(PY) -c "import sys, tbdtrace.schema as s; sys.stdout.write(s.render_markdown())" > docs/TRACE_FORMAT.md
	$(PY) -m tbdtrace.analysis.engine.outputs docs/METRICS.md
	$(PY) -m tbdtrace.analysis.facade docs/API.md

clean:
	rm -rf build out tbdtrace/*.so
