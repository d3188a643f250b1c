# Real agent CLIs for the end-to-end tests that run them against a scripted
# local model (internal/agentcli): the Claude Code CLI and Gemini CLI from the
# npm registry, pinned. Its package ships a native binary (the postinstall links it to
# bin/claude.exe); Node.js runs only the installer. The tests find it through
# CLAUDE_CODE_BIN and fail (not skip) under CI=true when it is absent.
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_CODE_DIR := $(TOOLS)/claude-code-$(CLAUDE_CODE_VERSION)
CLAUDE_CODE := $(CLAUDE_CODE_DIR)/node_modules/@anthropic-ai/claude-code/bin/claude.exe

.PHONY: claude-code

$(CLAUDE_CODE):
	mkdir -p $(CLAUDE_CODE_DIR)
	cd $(CLAUDE_CODE_DIR) && npm install --no-audit --no-fund --no-save @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	$(CLAUDE_CODE) --version

claude-code: $(CLAUDE_CODE)
tools: claude-code

test-unit: claude-code
test-unit: export CLAUDE_CODE_BIN ?= $(CLAUDE_CODE)

# Gemini CLI from the npm registry, pinned: a JavaScript bundle that needs
# Node.js (>= 20) to run. The tests find it through GEMINI_CLI_BIN and fail
# (not skip) under CI=true when it is absent.
GEMINI_CLI_VERSION := 0.61.0
GEMINI_CLI_DIR := $(TOOLS)/gemini-cli-$(GEMINI_CLI_VERSION)
GEMINI_CLI := $(GEMINI_CLI_DIR)/node_modules/.bin/gemini

.PHONY: gemini-cli

$(GEMINI_CLI):
	mkdir -p $(GEMINI_CLI_DIR)
	cd $(GEMINI_CLI_DIR) && npm install --no-audit --no-fund --no-save @google/gemini-cli@$(GEMINI_CLI_VERSION)
	$(GEMINI_CLI) --version

gemini-cli: $(GEMINI_CLI)
tools: gemini-cli

test-unit: gemini-cli
test-unit: export GEMINI_CLI_BIN ?= $(GEMINI_CLI)
