# Two commands on a fresh machine: `make run` (install + start the gateway), `make test`.
# `make run PORT=9000` starts it on another port (default: config.toml's, or HEARTH_PORT).
# `make run EXTRAS=telegram,slack` installs those integrations' extras too (pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
comma := ,
STAMP := $(VENV)/.installed$(if $(EXTRAS),-$(subst $(comma),-,$(EXTRAS)))
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test install install-dev lint docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# `make run` installs the gateway's core alone (the quick start needs no extra); `make test`
# adds every extra (the suite tests each integration) and the tools the tests use.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.$(if $(EXTRAS),[$(EXTRAS)])'
	$(BIN)/python -m compileall -q src > /dev/null  # a start reads bytecode, not source
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

run: install
	$(BIN)/hearth gateway$(if $(PORT), --port $(PORT))

lint: install-dev
	$(BIN)/ruff check src tests bench docs/gen
	$(BIN)/mypy src
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -n auto

# The documentation site, offline: the references regenerated (docs/gen/), then site/.
docs: install-dev
	$(BIN)/python -m docs.gen
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: install-dev
	$(BIN)/python bench/admission.py
	$(BIN)/python bench/append.py
	$(BIN)/python bench/recall.py
	$(BIN)/python bench/recovery.py
	$(BIN)/python bench/first_run.py
	$(BIN)/python bench/shell_placement.py
	$(BIN)/python bench/turns.py
	$(BIN)/python bench/turn_cost.py
	$(BIN)/python bench/provider.py
	$(BIN)/python bench/context.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/channels.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/replicas.py
	$(BIN)/python bench/attachments.py
	$(BIN)/python bench/backup.py
	$(BIN)/python bench/soak.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
