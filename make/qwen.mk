# Qwen Code from the npm registry, pinned, for the end-to-end tests that run
# it against a scripted OpenAI-compatible model (internal/agentcli): a
# JavaScript bundle run by Node.js. Its package declares Node.js >= 22, but
# 0.24.4 runs headless on Node.js 20 (npm only warns, EBADENGINE). The tests
# find it through QWEN_CODE_BIN and fail (not skip) under CI=true when it is
# absent.
QWEN_CODE_VERSION := 0.24.4
QWEN_CODE_DIR := $(TOOLS)/qwen-code-$(QWEN_CODE_VERSION)
QWEN_CODE := $(QWEN_CODE_DIR)/node_modules/.bin/qwen

.PHONY: qwen-code

$(QWEN_CODE):
	mkdir -p $(QWEN_CODE_DIR)
	cd $(QWEN_CODE_DIR) && npm install --no-audit --no-fund --no-save @qwen-code/qwen-code@$(QWEN_CODE_VERSION)
	$(QWEN_CODE) --version

qwen-code: $(QWEN_CODE)
tools: qwen-code

test-unit: qwen-code
test-unit: export QWEN_CODE_BIN ?= $(QWEN_CODE)
