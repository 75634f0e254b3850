# Two commands on a fresh machine with only Python 3.11+: `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
# The first interpreter on PATH that is Python >= 3.11, resolved to its absolute path.
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { $$p -c 'import sys; print(sys.executable)'; break; }; done)
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck pytest pytest-ray bench bench-latency clean

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: no Python >= 3.11 found on PATH" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,bench,ray]' --config-settings editable_mode=compat
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m benchmarks demo

lint: $(BIN)/.installed
	$(BIN)/ruff check ptc sdkgen worker tests benchmarks

typecheck: $(BIN)/.installed
	$(BIN)/mypy

# The Ray tests start a real cluster; Ray binds the machine's external interface unless it
# runs in a network namespace of its own, so that module runs here, in one, and nowhere else.
RAY_TESTS := tests/worker/test_ray.py

# The suite mostly waits for processes it starts (contained workers, MCP servers, hosts), so
# it runs in more pytest-xdist workers than there are cores; a module whose tests share a
# costly fixture, or must not overlap, is one xdist_group (docs/architecture.md, "The test
# suite"). Hypothesis draws a fixed set of examples (the "ci" profile of tests/conftest.py).
# A crashed worker (a test that took its process down, or pytest-timeout ending it) fails
# the run at once: xdist's replacement worker can break the group scheduler, which then
# ends in an INTERNALERROR that hides every failure.
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
export PTC_HYPOTHESIS_PROFILE ?= ci

pytest: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --max-worker-restart=0 --ignore=$(RAY_TESTS)
	@$(MAKE) --no-print-directory pytest-ray

# As root, a missing or failing unshare fails the build; only a non-root user skips (loudly).
pytest-ray: $(BIN)/.installed
	@if [ "$$(id -u)" != 0 ]; then \
		echo "SKIPPED $(RAY_TESTS): needs root for 'unshare -n' (its own network namespace)"; \
		exit 0; fi; \
	set -x; unshare -n sh -c 'ip link set lo up && exec env PTC_RAY_NETNS=1 $(BIN)/python -m pytest -q $(RAY_TESTS)'

# The three side by side (mypy's first run takes a minute of CPU the tests can share), their
# output as it comes (ruff's and mypy's few lines may land among pytest's progress dots).
# Any of them failing fails the target.
test: $(BIN)/.installed
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

bench: $(BIN)/.installed
	$(BIN)/python -m benchmarks all

# The headline figures of docs/benchmarks.md: the latency suite three times in a row, each
# run with the host's state (load, cgroup mount options, ...): results/latency-runs.md.
bench-latency: $(BIN)/.installed
	$(BIN)/python -m benchmarks latency --runs 3

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
