# Chromium for tests/test_report.py, which loads a `wirelog report` page in a real headless browser
# with the network blocked. Debian's `chromium` package, installed with apt-get when it is missing
# and the machine lets us (root, or sudo without a password); otherwise the target says so and that
# test skips with the reason.
.PHONY: chromium

chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "chromium: not installed and no apt-get; the report's browser test will skip"; \
	else \
		if [ "$$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=none; fi; \
		if [ "$$sudo" = none ]; then echo "chromium: not installed and no root to install it; the report's browser test will skip"; \
		else export DEBIAN_FRONTEND=noninteractive; \
			{ $$sudo apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
			  || { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; } \
			|| echo "chromium: apt-get could not install it; the report's browser test will skip"; \
		fi; \
	fi
