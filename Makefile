# Two commands on a fresh machine: `make run` (install + start the gateway), `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/hearth gateway

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/admission.py
	$(BIN)/python bench/append.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/recovery.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
