# The README's two commands: `make run` and `make test`. Each creates .venv when missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed

.PHONY: run test lint bench

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	mkdir -p var
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py bootstrap --base-url http://127.0.0.1:$(PORT)
	MEMSITE_PORT=$(PORT) $(BIN)/honcho start

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python bench/api_bench.py
