# Two entry points (see README): `make demo` and `make test`. Both build their own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= examples/lumberjack-pylogbeat.pcap

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/wirelog inspect $(DEMO)
	$(BIN)/wirelog convert $(DEMO) --events --to json | head -n 3

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(VENV)/.installed
	$(BIN)/python bench/bench_streams.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
