# otelcol-loop — build, test, demo, bench.
SHELL := /bin/bash
GO ?= go
export GOFLAGS ?= -buildvcs=false
TOOLS := $(CURDIR)/.tools
BUILDER_VERSION := v0.165.0
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
BUILDER := $(TOOLS)/builder
BENCHSTAT := $(TOOLS)/benchstat
FUZZTIME ?= 20s
BIN := $(CURDIR)/bin
DIST_DIR := cmd/otelcol-loop
OTELCOL := $(BIN)/otelcol-loop
# Tier-1 gateway (docs/scaling.md): its own ocb manifest and nested module,
# stock components pinned wholly to v0.161.0: the contrib load-balancing
# exporter is not served at v0.165 (docs/scaling.md).
GATEWAY_BUILDER_VERSION := v0.161.0
GATEWAY_BUILDER := $(TOOLS)/builder-$(GATEWAY_BUILDER_VERSION)/builder
GATEWAY_DIR := cmd/otelcol-loop-gateway
GATEWAY := $(BIN)/otelcol-loop-gateway

.PHONY: all build test test-unit bench fuzz demo tools generate clean
.PHONY: distribution generate-distribution build-distribution binaries check-generated validate-configs
.PHONY: gateway generate-gateway test-scaleout

all: build

$(BUILDER):
	GOBIN=$(TOOLS) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(BUILDER_VERSION)

$(BENCHSTAT):
	GOBIN=$(TOOLS) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

tools: $(BUILDER) $(GATEWAY_BUILDER) $(BENCHSTAT)

# mdatagen v0.159.0 is the newest the proxy here serves; it lives in its own
# tools module so its older collector pins never touch the root module.
generate:
	cd internal/tools && for f in $$(cd $(CURDIR) && ls processor/*/metadata.yaml exporter/*/metadata.yaml extension/*/metadata.yaml 2>/dev/null); do \
		$(GO) tool mdatagen $(CURDIR)/$$f || exit 1; done

build: distribution binaries
	$(GO) build ./...

# The collector distribution: ocb regenerates cmd/otelcol-loop (a nested
# module, committed) from builder-config.yaml, then it is compiled to
# bin/otelcol-loop. Run from the repository root: ocb resolves `path:` and
# `output_path` against the current directory.
distribution: generate-distribution build-distribution

generate-distribution: $(BUILDER)
	$(BUILDER) --config builder-config.yaml --skip-compilation

# Compiles the committed generated sources as they are (no ocb needed).
build-distribution:
	cd $(DIST_DIR) && $(GO) build -trimpath -o $(OTELCOL) .

# The repository's commands, next to the collector in bin/.
binaries:
	@mkdir -p $(BIN)
	@for d in cmd/*/; do n=$$(basename $$d); [ "$$n" = otelcol-loop ] && continue; [ -f $${d}go.mod ] && continue; \
		ls $$d*.go >/dev/null 2>&1 || continue; \
		echo "$(GO) build -o $(BIN)/$$n ./cmd/$$n"; $(GO) build -o $(BIN)/$$n ./cmd/$$n || exit 1; done

# Fails when regenerating cmd/otelcol-loop from builder-config.yaml would
# change the committed sources (the same test runs in `make test`).
check-generated: $(BUILDER)
	$(GO) test -count=1 -run 'TestGeneratedDistributionUpToDate' -v ./config/

# Every config/*.yaml passes `otelcol-loop validate` (also part of `make test`).
validate-configs:
	$(GO) test -count=1 -run 'TestConfigsValidate' -v ./config/

test-unit:
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	# decode_guard is a module of its own (both distributions use it; its
	# requirements are the gateway's older release): ./... skips it.
	cd extension/decodeguard && $(GO) vet ./... && $(GO) test -count=1 ./...
	# The image build and the page's browser tests are a module of their own
	# (internal/devtools), so that their requirements (go-containerregistry,
	# chromedp) are none of the component's: ./... skips it too.
	cd internal/devtools && $(GO) vet ./... && $(GO) test -count=1 ./...

# Both ocb versions are needed by the regeneration checks in ./config (each
# skipped only when its builder is absent: .tools/builder for cmd/otelcol-loop,
# .tools/builder-v0.161.0/builder for cmd/otelcol-loop-gateway), so `make test`
# installs them first.
test: $(BUILDER) $(GATEWAY_BUILDER) test-unit

# The config tests and the end-to-end test (internal/e2e) run this one
# bin/otelcol-loop instead of each compiling the distribution again.
test-unit: build-distribution
test-unit: export OTELCOL_LOOP_BIN ?= $(OTELCOL)

# The gateway is built once here (cold ~2 min, then cached) and handed to
# internal/scaleout, which otherwise compiles its own copy.
test-unit: gateway
test-unit: export OTELCOL_LOOP_GATEWAY_BIN ?= $(GATEWAY)

$(GATEWAY_BUILDER):
	GOBIN=$(TOOLS)/builder-$(GATEWAY_BUILDER_VERSION) $(GO) install go.opentelemetry.io/collector/cmd/builder@$(GATEWAY_BUILDER_VERSION)

# Regenerates cmd/otelcol-loop-gateway from its manifest (run from the root:
# ocb resolves output_path against the current directory).
generate-gateway: $(GATEWAY_BUILDER)
	$(GATEWAY_BUILDER) --config $(GATEWAY_DIR)/builder-config.yaml --skip-compilation

# Compiles the committed generated gateway sources to bin/otelcol-loop-gateway.
gateway:
	cd $(GATEWAY_DIR) && $(GO) build -trimpath -o $(GATEWAY) .

# Only the scale-out tests (gateway configs, Kubernetes manifests, three
# instances behind one gateway, rebalance), verbose.
test-scaleout: build-distribution gateway
	OTELCOL_LOOP_BIN=$(OTELCOL) OTELCOL_LOOP_GATEWAY_BIN=$(GATEWAY) $(GO) test -count=1 -v ./internal/scaleout/

# Benchmarks (docs/BENCHMARKS.md, summarised in BENCHMARKS.md): raw output in
# .bench/, all of it in bench.txt, the benchstat tables on stdout and the
# report written from them (machine, commit, date, targets met or not, where
# the time goes, ratios). Throughput
# runs use -cpu 1 so CPU time is one core's. About 9 minutes on 2 cores, 75 s
# of it the CPU profiles (below). BENCH_E2E=1 also builds the distribution
# and runs it end to end under loopagent --load at 10,000 and 50,000 spans/s
# (internal/benchdata/e2e, about 2 more minutes).
BENCH_COUNT ?= 6
BENCH_TIME ?= 0.3s
# Processor runs are a fixed number of 100-span batches: each run has a
# warm-up (every session visited once) and groupbytrace a drain, which a
# time-based -benchtime would count into its first b.N=1 probe.
BENCH_BATCHES ?= 2000x
# The non-tool mixes cost tens of ns per span: ten times the batches, so a
# run outlasts a GC cycle and a timer tick.
BENCH_BATCHES_NONTOOL ?= 20000x
BENCH_DIR := .bench
BENCH_CHANGES := internal/benchdata/changes
# CPU profiles for docs/BENCHMARKS.md's "Where the time goes": one -count 1 run
# per profiled benchmark after the measured ones, each long enough for about
# 200-1,000 samples (100 a second) inside the measured entry point (a
# processor run spends a third to three quarters of its time outside it,
# mostly renewing the batch pool). About 75 s on 2 cores. The test binaries
# are built once per package with -trimpath and kept beside the profiles, so
# `go tool pprof .bench/<pkg>.test .bench/cpu-<name>.prof` reads them later.
BENCH_PROF_TOOLS ?= 40000x
BENCH_PROF_NONTOOL ?= 1500000x
BENCH_PROF_TRACKED ?= 1000000x
BENCH_PROF_FLOOR ?= 1500000x
BENCH_PROF_OBSERVE ?= 6000000x
BENCH_PROF_CANONICAL ?= 3000000x
# $(call bench_profile,<binary>,<package dir>,<-bench>,<-benchtime>,<profile>[,<-skip>]):
# run from the package's directory, as go test does (the canonicalizer's
# benchmarks read testdata by relative path).
bench_profile = ( cd $(2) && $(CURDIR)/$(BENCH_DIR)/$(1) -test.run '^$$' -test.bench '$(3)' $(if $(6),-test.skip '$(6)') \
	-test.benchmem -test.cpu 1 -test.count 1 -test.benchtime $(4) -test.cpuprofile $(CURDIR)/$(BENCH_DIR)/$(5) )
bench: $(BENCHSTAT)
	@mkdir -p $(BENCH_DIR)
	set -o pipefail; ( $(GO) test -run '^$$' -bench '^BenchmarkProcessor$$/^mix=(realistic|tools|tools-fresh)$$' -benchmem -cpu 1 -count $(BENCH_COUNT) -benchtime $(BENCH_BATCHES) ./processor/loopdetect/ && \
		$(GO) test -run '^$$' -bench '^BenchmarkProcessor$$/^mix=(nontool|nontool-tracked)$$' -benchmem -cpu 1 -count $(BENCH_COUNT) -benchtime $(BENCH_BATCHES_NONTOOL) ./processor/loopdetect/ && \
		$(GO) test -run '^$$' -bench '^BenchmarkSpan$$' -benchmem -cpu 1 -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) ./processor/loopdetect/ ) | tee $(BENCH_DIR)/processor.txt
	set -o pipefail; ( $(GO) test -run '^$$' -bench '^BenchmarkObserve$$' -benchmem -cpu 1 -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) ./processor/loopdetect/engine/ && \
		$(GO) test -run '^$$' -bench '^Benchmark(Canonical|CanonicalBytes)$$' -benchmem -cpu 1 -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) ./processor/loopdetect/canon/ ) | tee $(BENCH_DIR)/engine.txt
	set -o pipefail; $(GO) test -run '^$$' -bench '^BenchmarkGrowth$$' -benchmem -cpu 1 -count 3 -benchtime $(BENCH_TIME) ./processor/loopdetect/engine/ | tee $(BENCH_DIR)/growth.txt
	set -o pipefail; ( $(GO) test -run '^$$' -bench '^BenchmarkSessionBytes$$' -benchtime 1x -count 3 ./processor/loopdetect/engine/ && \
		$(GO) test -run '^$$' -bench '^BenchmarkLoopTrace1M$$' -benchtime 1x -count 1 ./processor/loopdetect/ ) | tee $(BENCH_DIR)/memory.txt
	$(GO) test -c -trimpath -o $(BENCH_DIR)/loopdetect.test ./processor/loopdetect/
	$(GO) test -c -trimpath -o $(BENCH_DIR)/engine.test ./processor/loopdetect/engine/
	$(GO) test -c -trimpath -o $(BENCH_DIR)/canon.test ./processor/loopdetect/canon/
	set -o pipefail; ( $(call bench_profile,loopdetect.test,processor/loopdetect,^BenchmarkProcessor$$/^mix=tools$$/^proc=loop_detect$$,$(BENCH_PROF_TOOLS),cpu-tools.prof) && \
		$(call bench_profile,loopdetect.test,processor/loopdetect,^BenchmarkProcessor$$/^mix=nontool$$/^proc=loop_detect$$,$(BENCH_PROF_NONTOOL),cpu-nontool.prof) && \
		$(call bench_profile,loopdetect.test,processor/loopdetect,^BenchmarkProcessor$$/^mix=nontool$$/^proc=floor$$,$(BENCH_PROF_FLOOR),cpu-nontool-floor.prof) && \
		$(call bench_profile,loopdetect.test,processor/loopdetect,^BenchmarkProcessor$$/^mix=nontool-tracked$$/^proc=loop_detect$$,$(BENCH_PROF_TRACKED),cpu-nontool-tracked.prof) && \
		$(call bench_profile,loopdetect.test,processor/loopdetect,^BenchmarkProcessor$$/^mix=nontool-tracked$$/^proc=floor$$,$(BENCH_PROF_FLOOR),cpu-nontool-tracked-floor.prof) && \
		$(call bench_profile,engine.test,processor/loopdetect/engine,^BenchmarkObserve$$/^canon=on$$,$(BENCH_PROF_OBSERVE),cpu-observe.prof,^BenchmarkObserve$$/^canon=on$$/^loop=stuck$$) && \
		$(call bench_profile,canon.test,processor/loopdetect/canon,^BenchmarkCanonicalBytes$$/^size=2KiB$$/^api=result$$,$(BENCH_PROF_CANONICAL),cpu-canonical-2KiB.prof) ) | tee $(BENCH_DIR)/profiles.txt
	$(MAKE) --no-print-directory bench-instructions
	$(if $(BENCH_E2E),$(MAKE) build-distribution binaries && $(GO) run ./internal/benchdata/e2e -otelcol $(OTELCOL) -agent $(BIN)/loopagent -out $(BENCH_DIR)/e2e.txt)
	cat $(BENCH_DIR)/processor.txt $(BENCH_DIR)/engine.txt $(BENCH_DIR)/growth.txt $(BENCH_DIR)/memory.txt > bench.txt
	$(BENCHSTAT) bench.txt
	$(GO) run ./internal/benchdata/report -benchstat $(BENCHSTAT) -go $(GO) -dir $(BENCH_DIR) -out docs/BENCHMARKS.md -summary BENCHMARKS.md -changes $(BENCH_CHANGES)
	@echo "wrote docs/BENCHMARKS.md and its summary, BENCHMARKS.md"

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCanonicalArgs -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzNormalizeResult -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzCanonicalMatchesReencoding -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzCanonicalMatchesReference -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzLongValueMatchesReference -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzMaskedHashMatchesReference -fuzztime $(FUZZTIME) ./processor/loopdetect/canon/
	$(GO) test -run '^$$' -fuzz FuzzVerifyAndParse -fuzztime $(FUZZTIME) ./cmd/loopsupervisor/internal/webhook/

# The whole story on this machine, loopback only: otelcol-loop (config/demo.yaml),
# loopsupervisor around loopagent --scenario bash-loop, each transition as it
# happens, the kill, the result line, where to look; then it stops what it
# started. DEMO_SPEED (default 4), DEMO_SCENARIO, DEMO_KEEP: see scripts/demo.sh.
demo: build-distribution binaries
	scripts/demo.sh

clean:
	rm -rf $(TOOLS) bench.txt $(BENCH_DIR)

# Feature fragments (make/README.md): each adds its own targets and `test:` prerequisites.
include $(sort $(wildcard make/*.mk))

# Instructions per operation of the missed budgets' benchmarks, counted by
# callgrind (scripts/bench-instructions.sh) on the test binaries make bench
# built: steady where this VM's timings swing. Without valgrind (Debian
# package valgrind) the report says "not measured". The processor's rows
# include the pool's renewal, the same on every processor of a mix, so
# the report gives their differences. The tool mix is left out: under
# callgrind its renewal of 100 tool payloads a batch takes minutes.
INSTR_PROC := nontool/floor nontool/loop_detect nontool-tracked/floor nontool-tracked/usage-floor nontool-tracked/session-floor nontool-tracked/loop_detect
.PHONY: bench-instructions
bench-instructions:
	@command -v valgrind >/dev/null || { echo "bench-instructions: valgrind not found: not measured"; rm -f $(BENCH_DIR)/instructions.txt; exit 0; }
	set -e; out=$(CURDIR)/$(BENCH_DIR)/instructions.txt; : > $$out.tmp; \
	cd processor/loopdetect/engine; \
	echo "observe-canon $$($(CURDIR)/scripts/bench-instructions.sh $(CURDIR)/$(BENCH_DIR)/engine.test '^BenchmarkObserve$$/^canon=on$$' 20000 -test.skip '^BenchmarkObserve$$/^canon=on$$/^loop=stuck$$')" >> $$out.tmp; \
	echo "observe-nocanon $$($(CURDIR)/scripts/bench-instructions.sh $(CURDIR)/$(BENCH_DIR)/engine.test '^BenchmarkObserve$$/^canon=off$$' 20000)" >> $$out.tmp; \
	cd ../canon; \
	echo "canonical-2KiB $$($(CURDIR)/scripts/bench-instructions.sh $(CURDIR)/$(BENCH_DIR)/canon.test '^BenchmarkCanonicalBytes$$/^size=2KiB$$/^api=result$$' 20000)" >> $$out.tmp; \
	cd ..; for mp in $(INSTR_PROC); do \
		echo "processor/$$mp $$($(CURDIR)/scripts/bench-instructions.sh $(CURDIR)/$(BENCH_DIR)/loopdetect.test "^BenchmarkProcessor\$$/^mix=$${mp%/*}\$$/^proc=$${mp#*/}\$$" 2000)" >> $$out.tmp; done; \
	mv $$out.tmp $$out; cat $$out

# loopreplay's audit of past sessions at scale (internal/benchdata/audit):
# 1,000 generated sessions of mixed CLIs (some 200 MB), `loopreplay
# --summary` (and with --html) over the first 100 and all 1,000, three runs
# each: files/s, MB/s and peak RSS (GNU time, Debian package time) written
# to BENCHMARKS-audit.md, which docs/BENCHMARKS.md links. Not part of make test
# or make bench; a few minutes on 2 cores.
.PHONY: bench-audit
bench-audit:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/loopreplay ./cmd/loopreplay
	$(GO) run ./internal/benchdata/audit -loopreplay $(BIN)/loopreplay -testdata cmd/loopreplay/testdata -out BENCHMARKS-audit.md

# A two-stage canonical scanner (processor/loopdetect/internal/twostage):
# stage one in SWAR and in AVX2 (Go assembly), stage two's walk, beside the
# one-pass canonicalizer on the same documents, in interleaved rounds: the
# evidence behind docs/design.md's "The canonicalizer's speed". Not part of
# make bench.
.PHONY: bench-twostage
bench-twostage:
	@mkdir -p $(BENCH_DIR) $(BIN)
	$(GO) test -c -o $(BIN)/twostage.test ./processor/loopdetect/internal/twostage
	set -o pipefail; for r in $$(seq $(BENCH_COUNT)); do \
		$(BIN)/twostage.test -test.run '^$$' -test.bench '^BenchmarkTwoStage$$' -test.cpu 1 -test.benchtime $(BENCH_TIME) || exit 1; \
	done | tee $(BENCH_DIR)/twostage.txt
