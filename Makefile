# Two commands do everything on a fresh machine, installing included:
#   make demo   diagnose a shipped incident on the embedded default (no services, no key)
#   make test   lint, type-check and run the whole suite (starts PostgreSQL/Redis if not answering)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install services lint bench

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The demo stays offline even when the shell has ANTHROPIC_API_KEY (VERITY_PROVIDER overrides).
demo: $(STAMP)
	VERITY_PROVIDER=$(or $(VERITY_PROVIDER),offline) $(BIN)/verity run "Why is checkout-service returning 500s?" --scenario checkout-pool-exhaustion

services:
	scripts/services.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(STAMP) services lint
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP) services
	$(BIN)/python bench/gatekeeper.py
	$(BIN)/python bench/runtime.py
	$(BIN)/python bench/prompt_tokens.py
	$(BIN)/python bench/llm_concurrency.py
	$(BIN)/python bench/chaos.py
	$(BIN)/python bench/grounding.py
	$(BIN)/python bench/sources.py
	$(BIN)/python bench/http_api.py
