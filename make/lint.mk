# Lint (make lint): golangci-lint v2 over the root module and gofmt over every
# Go file but the generated distributions. `make test` runs it first, so a
# finding fails the suite.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

$(GOLANGCI_LINT):
	GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: lint gofmt-check
lint: $(GOLANGCI_LINT) gofmt-check
	$(GOLANGCI_LINT) run ./...
	cd internal/devtools && $(GOLANGCI_LINT) run ./...

# gofmt over everything except the ocb-generated distributions (nested
# modules golangci-lint does not see).
gofmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v -e '^cmd/otelcol-loop/' -e '^cmd/otelcol-loop-gateway/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: lint
