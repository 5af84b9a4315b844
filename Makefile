# Two commands do everything on a fresh machine, installing included:
#   make demo   verify a shipped sample run bundle on the embedded default (no services, no key)
#   make test   lint, type-check and run the whole suite (starts PostgreSQL/Redis if not answering)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install services lint bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/verity verify samples/bundles/pass.json

services:
	scripts/services.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(STAMP) services lint
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python bench/gatekeeper.py
