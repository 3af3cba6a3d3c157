# Two entry points (see README): `make demo` and `make test`. Both build their own virtualenv and the
# native core (native/, Rust, release profile) into it; cargo's target/ is kept between runs.
PYTHON ?= python3
CARGO ?= cargo
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= examples/lumberjack-pylogbeat.pcap
DEMO_REPORT ?= .cache/demo/report.html

PEERS_NPM := tests/peers/lumberjack
NATIVE := native
NATIVE_SRC := $(shell find $(NATIVE)/src -name '*.rs') $(NATIVE)/Cargo.toml $(NATIVE)/Cargo.lock
PY_SRC := $(shell find wirelog -name '*.py')
MATURIN_VENV := .cache/maturin
DIST := dist
FUZZ_SECONDS ?= 10
FUZZ_RUNS ?= 150000
FUZZ_SEED ?= 1

# The peers' make files define targets; `make` alone still builds the demo.
.DEFAULT_GOAL := demo
include mk/go-peers.mk
include mk/cassandra.mk
include mk/courier-peers.mk
include mk/chromium.mk

.PHONY: demo test lint bench clean peers native-test fuzz fuzz-long wheel

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# pip builds wirelog._core with maturin (pyproject.toml); a stale .so must not shadow the new one.
$(VENV)/.installed: $(BIN)/python pyproject.toml $(NATIVE_SRC)
	rm -f wirelog/_core*.so
	$(BIN)/python -m pip install --quiet -e '.[report]'
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml $(NATIVE_SRC)
	rm -f wirelog/_core*.so
	$(BIN)/python -m pip install --quiet -e '.[test,spark,report]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/wirelog inspect $(DEMO)
	$(BIN)/wirelog convert $(DEMO) --events --to json | head -n 3
	@mkdir -p $(dir $(DEMO_REPORT))
	@$(BIN)/wirelog report $(DEMO) -o $(DEMO_REPORT) >/dev/null
	@echo "report of the sample (open it in a browser, it works offline): $(abspath $(DEMO_REPORT))"

# The wheel users install and the Spark engine ships to a cluster's executors (docs/spark.md):
# manylinux2014 (glibc 2.17, what clusters still run; polars and pydantic-core ship the same) and abi3
# (one wheel for Python >= 3.11). maturin links the core with zig (`--zig`, the `ziglang` package from
# PyPI), which targets glibc 2.17 whatever this machine's glibc is; maturin and zig are pinned and
# live in the build's own venv. The zig build has a target directory of its own (ZIG_TARGET), so it
# and the editable install's build do not invalidate each other's artifacts. When zig cannot be
# installed, the wheel is built as before (tagged for this machine's glibc) and dist/.no-zig says
# why (tests/test_wheel.py skips its glibc check with that reason). The zig build strips nothing:
# zig's linker reads cargo's "strip debug info" (--strip-debug) as "strip everything", which would
# leave a panic's backtrace (`--debug`, the internal.panic finding) without a single function name;
# the price is std's line tables in the core (7.8 MB instead of 4.9, the wheel 2.9 MB instead of 2).
# `make wheel` then puts the wheel's core into an editable install of this checkout (wirelog/), so the
# checkout runs, tests and ships to Spark executors (engine/spark_ship.py: dist/'s wheel only when it
# holds the running code, byte for byte) the very core the wheel carries.
MATURIN_VERSION := 1.16.0
ZIGLANG_VERSION := 0.15.2
ZIG_TARGET := $(NATIVE)/target/zig
MATURIN_STAMP := $(MATURIN_VENV)/.maturin-$(MATURIN_VERSION)

wheel: $(DIST)/.built
	@if ls wirelog/_core*.so >/dev/null 2>&1; then $(PYTHON) -c 'import glob, os, zipfile; \
		[whl] = glob.glob("$(DIST)/wirelog-*.whl"); so = "wirelog/_core.abi3.so"; \
		core = zipfile.ZipFile(whl).read(so); \
		same = os.path.exists(so) and open(so, "rb").read() == core; \
		same or (open(so + ".tmp", "wb").write(core), os.chmod(so + ".tmp", 0o755), os.replace(so + ".tmp", so))'; fi

$(MATURIN_STAMP):
	test -x $(MATURIN_VENV)/bin/python || $(PYTHON) -m venv $(MATURIN_VENV)
	$(MATURIN_VENV)/bin/python -m pip install --quiet 'maturin==$(MATURIN_VERSION)'
	touch $@

# ziglang is (re)tried on every build that lacks it: a machine that was offline once is not stuck.
$(DIST)/.built: Makefile $(MATURIN_STAMP) pyproject.toml $(NATIVE_SRC) $(PY_SRC)
	rm -f $(DIST)/wirelog-*.whl $(DIST)/.no-zig
	@mkdir -p $(DIST)
	@$(MATURIN_VENV)/bin/python -c 'import importlib.metadata as m; assert m.version("ziglang") == "$(ZIGLANG_VERSION)"' 2>/dev/null \
		|| err=$$($(MATURIN_VENV)/bin/python -m pip install --quiet --retries 1 --timeout 30 'ziglang==$(ZIGLANG_VERSION)' 2>&1) \
		|| { echo "pip could not install ziglang==$(ZIGLANG_VERSION) ($$(echo "$$err" | tail -n 1)), so the wheel is built without zig, for this machine's glibc" >$(DIST)/.no-zig; \
		     echo "wheel: $$(cat $(DIST)/.no-zig)"; }
	if [ -e $(DIST)/.no-zig ]; then $(MATURIN_VENV)/bin/maturin build --quiet --release --out $(DIST); \
	else PATH="$(abspath $(MATURIN_VENV))/bin:$$PATH" CARGO_TARGET_DIR="$(abspath $(ZIG_TARGET))" \
		CARGO_PROFILE_RELEASE_STRIP=none $(MATURIN_VENV)/bin/maturin build --quiet --release --zig --compatibility manylinux2014 --out $(DIST); fi
	touch $@

# Real npm Lumberjack clients for the peer tests (skipped by the tests when npm is unavailable).
peers: peers-go peers-cassandra peers-courier
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --silent --no-audit --no-fund --prefix $(PEERS_NPM) || echo "peers: npm ci failed; npm peer tests will skip"; \
	else echo "peers: npm not found; npm peer tests will skip"; fi

test: $(VENV)/.installed-test wheel peers chromium native-test fuzz
	$(BIN)/python -m pytest -q --durations=25  # the slowest, to keep the whole run under 30 minutes

# Throughput against tshark and in-run floors (bench/; minutes, and the machine must be quiet).
bench: $(VENV)/.installed-test
	$(BIN)/python bench/bench_streams.py
	$(BIN)/python bench/bench_lumberjack.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_shapes.py

# The core's own tests and lints (no Python linked: the PyO3 module is behind the `python` feature).
native-test:
	cd $(NATIVE) && $(CARGO) fmt --check && $(CARGO) clippy --locked --all-targets -- -D warnings \
		&& $(CARGO) clippy --locked --features python -- -D warnings && $(CARGO) test --locked --quiet

# Every fuzz target briefly (FUZZ_RUNS inputs or FUZZ_SECONDS, whichever ends first: at most ten
# seconds per target; a fixed seed, so a run is the same every time); needs a nightly toolchain and
# cargo-fuzz. Each target gets the integer boundaries of native/fuzz/dicts/boundaries.dict and its
# own tokens (dicts/<target>.dict) as a libFuzzer dictionary. Inputs a fuzzer ever failed on are replayed by `cargo test` (native/fuzz/regressions/).
fuzz:
	@if $(CARGO) +nightly --version >/dev/null 2>&1; then \
		command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install --quiet --locked cargo-fuzz; \
		cd $(NATIVE)/fuzz && log=$$(mktemp) && dict=$$(mktemp) && for t in $$($(CARGO) +nightly fuzz list); do \
			cat dicts/boundaries.dict $$(ls dicts/$$t.dict 2>/dev/null) >$$dict; \
			if ! $(CARGO) +nightly fuzz run $$t -- -seed=$(FUZZ_SEED) -runs=$(FUZZ_RUNS) \
				-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -dict=$$dict \
				>$$log 2>&1; then tail -n 40 $$log; rm -f $$log $$dict; exit 1; fi; \
			echo "fuzz $$t: $$(grep -h 'stat::number_of_executed_units' $$log)"; \
		done; rm -f $$log $$dict; \
	else echo "fuzz: no nightly Rust toolchain; fuzz targets skipped"; fi

# The long run whose figures the native-core issue asks for (an hour per target).
fuzz-long:
	$(MAKE) fuzz FUZZ_SECONDS=3600 FUZZ_RUNS=-1 FUZZ_SEED=0

clean:
	rm -rf $(VENV) $(DIST) $(MATURIN_VENV) build *.egg-info .pytest_cache $(PEERS_NPM)/node_modules wirelog/_core*.so tests/peers/go/bin
