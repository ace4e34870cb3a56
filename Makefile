# make run   — set up .venv and differentiate the example, printing its IR and gradient
# make test  — set up .venv and run the test suite
# make test-all — the test suite on every supported CPython found (3.11, 3.12, 3.13), each in .venv-3.X
# make bench — set up .venv (with the peers) and run the benchmarks (targets table first; the
#              data-parallel targets of issue 13 in bench/results/parallel.md)
# make bench-targets — only the targets table of issue 9 (bytegrad alone, about a minute)
# (make bench ends with the compiled tier's targets of issue 12: python -m bytegrad.bench.compiled,
#  and the Hessian-vector product target of issue 11: python -m bytegrad.bench.hvp)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1

.PHONY: run test test-all bench bench-targets clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

$(VENV)/.bench: pyproject.toml | $(VENV)/.dev
	$(BIN)/pip install -q -e ".[dev,bench]" || $(BIN)/pip install -q autograd matplotlib torch==2.13.0
	touch $@

run: $(VENV)/.dev
	$(BIN)/bytegrad ir dump examples/example.py:loss --stage all
	$(BIN)/python examples/example.py

test: $(VENV)/.dev
	$(BIN)/python -m pytest tests

test-all:
	.ci/test-all

bench: $(VENV)/.bench
	$(BIN)/python -m bytegrad.bench
	$(BIN)/python -m bytegrad.bench.parallel
	$(BIN)/python -m bytegrad.bench.kernels_elementwise --quick
	$(BIN)/python -m bytegrad.bench.kernels_indexing --quick
	$(BIN)/python -m bytegrad.bench.compiled
	$(BIN)/python -m bytegrad.bench.hvp

bench-targets: $(VENV)/.dev
	$(BIN)/python -m bytegrad.bench --targets

clean:
	rm -rf $(VENV) $(VENV)-3.*
