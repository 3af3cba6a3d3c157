# The genuine Go Log Courier for tests/test_courier_go_peers.py: the shipper (log-courier), the
# receiver (log-carver) and lc-tlscert, built from the unmodified sources in ../shared/peers/
# log-courier (read-only in CI; the module proxy refuses the module itself but serves its
# dependencies) into .cache/log-courier/bin. Skipped with a notice when go (>= 1.21) or the sources
# are missing, and when the binaries are newer than every source file; a failing build fails.
GO ?= go
COURIER_SRC ?= ../shared/peers/log-courier
COURIER_BIN := .cache/log-courier/bin
_courier_peers_goal := $(.DEFAULT_GOAL)

.PHONY: peers-courier

peers-courier:
	@if ! command -v $(GO) >/dev/null 2>&1; then \
		echo "peers-courier: go not found; Log Courier peer tests will skip"; \
	elif [ ! -f $(COURIER_SRC)/go.mod ]; then \
		echo "peers-courier: $(COURIER_SRC) absent; Log Courier peer tests will skip"; \
	elif [ "$$(printf '%s\n' go1.21 "$$($(GO) env GOVERSION)" | sort -V | head -n 1)" != go1.21 ]; then \
		echo "peers-courier: $$($(GO) env GOVERSION) is older than go1.21; Log Courier peer tests will skip"; \
	elif [ -x $(COURIER_BIN)/log-carver ] && [ -x $(COURIER_BIN)/log-courier ] && [ -x $(COURIER_BIN)/lc-tlscert ] \
		&& [ -z "$$(find $(COURIER_SRC) -newer $(COURIER_BIN)/log-carver -print -quit)" ]; then \
		echo "peers-courier: $(COURIER_BIN) is up to date"; \
	else \
		mkdir -p $(COURIER_BIN) && out=$(CURDIR)/$(COURIER_BIN) \
		&& cache=$$($(GO) env GOCACHE) \
		&& if [ -z "$$cache" ] || [ "$$cache" = off ]; then cache=$(CURDIR)/.cache/log-courier/go-build; fi \
		&& cd $(COURIER_SRC) && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" GOCACHE=$$cache \
			$(GO) build -o "$$out/" . ./log-carver ./lc-tlscert \
		&& touch "$$out"/log-courier "$$out"/log-carver "$$out"/lc-tlscert; \
	fi

# Included before the Makefile's own rules: leave its default goal as it was.
.DEFAULT_GOAL := $(_courier_peers_goal)
