# otelcol-loop — build, test, demo, bench.
SHELL := /bin/bash
GO ?= go
export GOPROXY ?= https://proxy.golang.org
export GOFLAGS ?= -buildvcs=false
TOOLS := $(CURDIR)/.tools
BUILDER_VERSION := v0.165.0
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
BUILDER := $(TOOLS)/builder
BENCHSTAT := $(TOOLS)/benchstat
FUZZTIME ?= 20s

.PHONY: all build test test-unit bench fuzz demo tools generate clean

all: build

$(BUILDER):
	GOBIN=$(TOOLS) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(BUILDER_VERSION)

$(BENCHSTAT):
	GOBIN=$(TOOLS) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

tools: $(BUILDER) $(BENCHSTAT)

# mdatagen v0.159.0 is the newest the proxy here serves; it lives in its own
# tools module so its older collector pins never touch the root module.
generate:
	cd internal/tools && for f in $$(cd $(CURDIR) && ls processor/*/metadata.yaml exporter/*/metadata.yaml 2>/dev/null); do \
		$(GO) tool mdatagen $(CURDIR)/$$f || exit 1; done

build:
	$(GO) build ./...

test-unit:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

test: test-unit

bench: $(BENCHSTAT)
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./processor/loopdetect/... | tee bench.txt
	$(BENCHSTAT) bench.txt

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCanonicalArgs -fuzztime $(FUZZTIME) ./processor/loopdetect/engine/
	$(GO) test -run '^$$' -fuzz FuzzNormalizeResult -fuzztime $(FUZZTIME) ./processor/loopdetect/engine/

demo:
	@echo "make demo arrives with the distribution issue (#5)"; exit 1

clean:
	rm -rf $(TOOLS) bench.txt
