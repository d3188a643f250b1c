# Browser test of loopreplay's --html page: real headless Chromium driven
# from Go (chromedp). Debian's chromium is installed only when absent.
CHROMIUM ?= /usr/bin/chromium
.PHONY: chromium test-browser

chromium:
	@if [ ! -x "$(CHROMIUM)" ]; then \
		echo "installing Debian's chromium for the browser test"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# Runs only the page tests. With LOOPREPLAY_CHROMIUM set they fail, not
# skip, when the browser cannot start.
test-browser: chromium
	$(GO) test -count=1 -run 'TestPage' ./internal/replay/
	cd internal/devtools && LOOPREPLAY_CHROMIUM=$(CHROMIUM) $(GO) test -count=1 ./pagebrowser/

# `make test` runs the page tests inside test-unit (internal/devtools), with the
# browser installed first and required.
test-unit: chromium
test-unit: export LOOPREPLAY_CHROMIUM ?= $(CHROMIUM)

# Rewrites docs/loopreplay-bash-loop.png, the README's picture of the 1,972-call incident's replay page.
.PHONY: screenshot
screenshot: chromium
	cd internal/devtools && LOOPREPLAY_CHROMIUM=$(CHROMIUM) $(GO) test -count=1 -run 'TestPageInBrowser/screenshot' ./pagebrowser/ -args -screenshot $(CURDIR)/docs/loopreplay-bash-loop.png
