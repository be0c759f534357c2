# Two commands on a fresh machine:
#   make run    -> creates .venv, installs, starts the web UI on the shipped model (http://127.0.0.1:7860)
#   make test   -> creates .venv, installs, runs the default (CPU) test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/drt-reader: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

.PHONY: run test install
install: $(BIN)/drt-reader

run: install
	$(BIN)/drt-reader serve

test: install
	$(BIN)/python -m pytest
