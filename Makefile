# Two commands for a newcomer: `make demo` and `make test`. Both create .venv on first use:
# `make demo` installs only mrecord and its core dependencies (a few MB); `make test` adds
# the dev set (torch, Ray, pyarrow, ...: about 2.3 GB) at the versions CI pins in
# constraints/ci.txt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.installed-core
STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-thorough test-min-deps test-newest lint bench clean browser mutation

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE_STAMP)

$(STAMP): pyproject.toml constraints/ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints/ci.txt -e '.[dev]'
	touch $(CORE_STAMP) $(STAMP)

demo: $(CORE_STAMP)
	$(BIN)/python -m mrecord.demo

# The browser test of `mrecord serve` drives Debian's chromium (Playwright cannot download its own).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

# The declared minimum numpy (pyproject: numpy>=1.24) on the core tests, in its own venv.
MIN_VENV := .venv-min
MIN_STAMP := $(MIN_VENV)/.installed-min
MIN_TESTS := tests/writer/test_roundtrip.py tests/writer/test_writer_errors.py \
	tests/reader/test_reader_errors.py tests/reader/test_reader_access.py \
	tests/sampling/test_order.py tests/sampling/test_shuffle.py tests/sampling/test_sharding.py \
	tests/sampling/test_samplers.py tests/pipeline/test_pipeline.py \
	tests/reliability/test_corruption.py tests/cli/test_cli.py tests/cli/test_cli_polish.py \
	tests/reliability/test_fuzz.py tests/docs/test_packaging.py

$(MIN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet 'numpy==1.24.*' 'pytest>=8' 'hypothesis>=6.100' 'Pillow>=10.0' -e .
	touch $(MIN_STAMP)

test-min-deps: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider $(MIN_TESTS)

# The same core tests on the newest Python the package claims (3.13), with the newest
# releases of the core dependencies. pyenv's 3.13 where it is there, else python3.13.
PYTHON_NEWEST ?= $(or $(lastword $(wildcard /root/.pyenv/versions/3.13.*/bin/python3.13)),$(shell command -v python3.13))
NEW_VENV := .venv-newest
NEW_STAMP := $(NEW_VENV)/.installed-newest

$(NEW_STAMP): pyproject.toml
	@test -n "$(PYTHON_NEWEST)" || { echo "make test-newest: no Python 3.13 found (pyenv install 3.13, or set PYTHON_NEWEST=/path/to/python3.13)"; exit 1; }
	$(PYTHON_NEWEST) -m venv $(NEW_VENV)
	$(NEW_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(NEW_VENV)/bin/python -m pip install --quiet 'pytest>=8' 'hypothesis>=6.100' 'Pillow>=10.0' -e .
	touch $(NEW_STAMP)

test-newest: $(NEW_STAMP)
	$(NEW_VENV)/bin/python -m pytest -q -p no:cacheprovider $(MIN_TESTS)

test-thorough: $(STAMP) browser
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -q -m "slow or not slow"

lint: $(STAMP)
	$(BIN)/ruff check mrecord tests tools benchmarks reliability harness examples
	$(BIN)/mypy

# Mutation testing (not in CI: it takes tens of minutes): mutmut over the scope and tests in
# pyproject.toml [tool.mutmut], in a temporary copy of the tree (docs/RELIABILITY.md).
mutation: $(STAMP)
	test -x $(BIN)/mutmut || $(BIN)/python -m pip install --quiet 'mutmut==3.8.1'
	MUTMUT=$(CURDIR)/$(BIN)/mutmut tools/mutation.sh

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) $(MIN_VENV) $(NEW_VENV) build *.egg-info
