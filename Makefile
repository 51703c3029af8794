# The two commands that matter: `make run` (evaluate an example case, offline) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/reasoning-service demo

test: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/pytest -q

lint: setup
	$(BIN)/ruff check src tests eval
	$(BIN)/ruff format --check src tests eval

clean:
	rm -rf $(VENV) .pytest_cache reasoning.db*
