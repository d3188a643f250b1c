# OpenCode from the npm registry, pinned, for the end-to-end tests that run
# it against a scripted local model (internal/agentcli/opencode.go). Its
# package ships a native binary in a per-platform dependency (the
# postinstall links it to bin/opencode.exe); Node.js runs only the
# installer. The tests find it through OPENCODE_BIN and fail (not skip)
# under CI=true when it is absent.
OPENCODE_VERSION := 1.18.33
OPENCODE_DIR := $(TOOLS)/opencode-$(OPENCODE_VERSION)
OPENCODE := $(OPENCODE_DIR)/node_modules/opencode-ai/bin/opencode.exe

.PHONY: opencode

$(OPENCODE):
	mkdir -p $(OPENCODE_DIR)
	cd $(OPENCODE_DIR) && npm install --no-audit --no-fund --no-save opencode-ai@$(OPENCODE_VERSION)
	$(OPENCODE) --version

opencode: $(OPENCODE)
tools: opencode

test-unit: opencode
test-unit: export OPENCODE_BIN ?= $(OPENCODE)
