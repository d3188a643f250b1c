# Real agent CLIs for the end-to-end tests that run them against a scripted
# local model (internal/agentcli): the Claude Code CLI from the npm registry,
# pinned. Its package ships a native binary (the postinstall links it to
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
