# Two entry points (see README):  make reproduce   and   make test
# Both create .venv with the project installed if it is missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: venv reproduce test test-package test-notebooks lint benchmark clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## Execute every notebook and build build/html/index.html with the reproduction scorecard.
reproduce: $(STAMP)
	$(BIN)/vrs reproduce

## The test suite: package tests, then every notebook re-executed and validated with nbval - under another
## OpenBLAS kernel family, single-threaded, than the one that made the committed outputs (issue 19: the checked
## outputs must not depend on the last digits of floats; tests/test_nbval_blas.py checks the kernel differs).
NBVAL_BLAS = OPENBLAS_CORETYPE=Prescott OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
test: $(STAMP)
	$(BIN)/python -m pytest tests --durations=15
	$(NBVAL_BLAS) $(BIN)/python -m pytest --nbval-lax --nbval-current-env -p no:cacheprovider notebooks

lint: $(STAMP)
	$(BIN)/ruff check vrs_helpers tests benchmarks

benchmark: $(STAMP)
	$(BIN)/python benchmarks/mixed_models.py
	$(BIN)/python benchmarks/significance.py
	$(BIN)/python benchmarks/circularity.py
	$(BIN)/python benchmarks/analyze.py
	$(BIN)/python benchmarks/input_errors.py
	$(BIN)/python benchmarks/judge_type_one_error.py

clean:
	rm -rf build
