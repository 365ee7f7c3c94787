# Each target sets up what it needs on first use: a .venv in the repo with dpledger installed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PG_BIN := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) $(shell command -v initdb 2>/dev/null))

.PHONY: demo test bench lint typecheck clean postgres browser notebooks flower-demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,postgres,plot,notebooks,pld,service,flower,flower-sim]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dpledger demo --fresh

# The Flower example end to end in one process (no Ray): every round's releases, refusals
# and health counters. `flwr run examples/flower-eval` runs the same app on Flower's engine.
flower-demo: $(STAMP)
	cd examples/flower-eval && FLWR_TELEMETRY_ENABLED=0 ../../$(PY) -m flower_eval.demo $(FLOWER_ARGS)

postgres:
	@if [ -z "$(PG_BIN)" ]; then \
	  echo "PostgreSQL not found: installing it (apt-get install postgresql)"; \
	  (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) || \
	  echo "WARNING: could not install PostgreSQL; its tests will be SKIPPED (loudly)"; \
	fi

# The service's page is tested in Debian's Chromium, driven by Playwright (never `playwright
# install`: it downloads a browser build this network cannot reach).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "Chromium not found: installing it (apt-get install chromium)"; \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
	  echo "WARNING: could not install Chromium; the browser tests will be SKIPPED (loudly)"; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check dpledger tests benchmarks notebooks examples
	$(VENV)/bin/ruff format --check dpledger tests benchmarks notebooks examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict dpledger

# Two workers (pytest-xdist): CI has 2 cores and the suite is mostly CPU-bound statistics;
# then the tests marked serial (schemathesis' sub-tests do not distribute) in one process.
# TEST_WORKERS=0 runs the first part in one process too.
TEST_WORKERS ?= 2
test: $(STAMP) postgres browser lint typecheck
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not serial"
	$(PY) -m pytest -q -m serial

# Re-pair each notebook with its .py source (the newer side wins) and store fresh outputs.
notebooks: $(STAMP)
	cd notebooks && for src in [0-9][0-9]-*.py; do \
	  ../$(VENV)/bin/jupytext --quiet --sync "$$src" && \
	  ../$(VENV)/bin/jupyter-execute --inplace --timeout=600 "$${src%.py}.ipynb" || exit 1; \
	done

bench: $(STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
