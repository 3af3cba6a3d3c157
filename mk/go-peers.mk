# Real Go Lumberjack peers for tests/test_go_peers.py: elastic/go-lumber's v2 client and server in
# one harness (tests/peers/go, versions pinned by its go.mod/go.sum; modules from the default module
# cache). Skipped with a notice when go is missing (the tests then skip too); a failing build fails.
GO ?= go
_go_peers_goal := $(.DEFAULT_GOAL)
PEERS_GO := tests/peers/go

.PHONY: peers-go

peers-go:
	@if command -v $(GO) >/dev/null 2>&1; then \
		cd $(PEERS_GO) && GOTOOLCHAIN=local GOFLAGS=-mod=mod $(GO) build -o bin/ ./golumber; \
	else echo "peers-go: go not found; Go peer tests will skip"; fi

# Included before the Makefile's own rules: leave its default goal as it was.
.DEFAULT_GOAL := $(_go_peers_goal)
