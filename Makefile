# Two entry points (see README): `make demo` and `make test`. Both build their own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= examples/lumberjack-pylogbeat.pcap

PEERS_NPM := tests/peers/lumberjack

.PHONY: demo test lint bench clean peers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/wirelog inspect $(DEMO)
	$(BIN)/wirelog convert $(DEMO) --events --to json | head -n 3

# Real npm Lumberjack clients for the peer tests (skipped by the tests when npm is unavailable).
peers:
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --silent --no-audit --no-fund --prefix $(PEERS_NPM) || echo "peers: npm ci failed; npm peer tests will skip"; \
	else echo "peers: npm not found; npm peer tests will skip"; fi

test: $(VENV)/.installed-test peers
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_streams.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(PEERS_NPM)/node_modules
