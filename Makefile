# Two commands on a fresh machine with only Python 3.11+: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
# The first interpreter on PATH that is Python >= 3.11, resolved to its absolute path.
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { $$p -c 'import sys; print(sys.executable)'; break; }; done)
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: no Python >= 3.11 found on PATH" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,bench]' --config-settings editable_mode=compat
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m benchmarks demo

lint: $(BIN)/.installed
	$(BIN)/ruff check ptc sdkgen worker tests benchmarks

typecheck: $(BIN)/.installed
	$(BIN)/mypy

pytest: $(BIN)/.installed
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks all

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
