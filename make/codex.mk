# OpenAI Codex CLI from the npm registry, pinned, for the end-to-end tests that
# run it against a scripted local model. The package ships a native Rust binary
# in a per-platform dependency (@openai/codex-linux-x64 on this machine); the
# bin/codex.js launcher only picks and execs it, so Node.js runs the launcher
# alone. The tests find it through CODEX_CLI_BIN.
CODEX_CLI_VERSION := 0.169.0
CODEX_CLI_DIR := $(TOOLS)/codex-$(CODEX_CLI_VERSION)
CODEX_CLI := $(CODEX_CLI_DIR)/node_modules/.bin/codex

.PHONY: codex-cli

$(CODEX_CLI):
	mkdir -p $(CODEX_CLI_DIR)
	cd $(CODEX_CLI_DIR) && npm install --no-audit --no-fund --no-save @openai/codex@$(CODEX_CLI_VERSION)
	$(CODEX_CLI) --version

codex-cli: $(CODEX_CLI)
tools: codex-cli

test-unit: codex-cli
test-unit: export CODEX_CLI_BIN ?= $(CODEX_CLI)
