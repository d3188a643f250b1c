# Before/after evidence for a speed change (CONTRIBUTING.md):
#   make bench-compare BASE=<rev> OUT=internal/benchdata/changes/<name> [ROUNDS=6] [PREFIX=loaded-]
# builds BASE in a temporary worktree with today's benchmark sources and
# workload generator copied over it (so both sides run the same
# benchmarks), then runs BASE and the working tree interleaved, ROUNDS
# times, at -cpu 1, into $(OUT)/$(PREFIX)before.txt and after.txt. The
# non-tool mixes run ten times the batches, as in make bench. Both sides
# are built with -trimpath: without it the checkout's path moved code and
# data in the binary enough to change the canonicalizer's speed by a third.
# BASE must have the canonicalizer in processor/loopdetect/canon (its
# benchmarks are copied there); a BASE from before the move has it in the
# engine, and its own engine benchmarks are not those of today.
ROUNDS ?= 6
PREFIX ?=
BENCH_OVERLAY := processor/loopdetect/bench_test.go processor/loopdetect/engine/bench_test.go processor/loopdetect/canon/bench_test.go internal/benchdata/benchdata.go

.PHONY: bench-compare
bench-compare: $(BENCHSTAT)
	@test -n "$(BASE)" -a -n "$(OUT)" || { echo "usage: make bench-compare BASE=<rev> OUT=<dir> [ROUNDS=6] [PREFIX=loaded-]"; exit 2; }
	@set -e; tmp=$$(mktemp -d); trap 'git worktree remove --force $$tmp/base >/dev/null 2>&1; rm -rf $$tmp' EXIT; \
	git worktree add --detach $$tmp/base $(BASE) >/dev/null; \
	for f in $(BENCH_OVERLAY); do cp $$f $$tmp/base/$$f; done; \
	(cd $$tmp/base && $(GO) test -trimpath -c -o $$tmp/before-proc.test ./processor/loopdetect && $(GO) test -trimpath -c -o $$tmp/before-eng.test ./processor/loopdetect/engine && \
		$(GO) test -trimpath -c -o $$tmp/before-canon.test ./processor/loopdetect/canon); \
	$(GO) test -trimpath -c -o $$tmp/after-proc.test ./processor/loopdetect; $(GO) test -trimpath -c -o $$tmp/after-eng.test ./processor/loopdetect/engine; \
	$(GO) test -trimpath -c -o $$tmp/after-canon.test ./processor/loopdetect/canon; \
	mkdir -p $(OUT); out=$$(cd $(OUT) && pwd); rm -f $$out/$(PREFIX)before.txt $$out/$(PREFIX)after.txt; \
	for i in $$(seq $(ROUNDS)); do for side in before after; do \
		dir=$(CURDIR); [ $$side = before ] && dir=$$tmp/base; \
		(cd $$dir/processor/loopdetect && \
		 $$tmp/$$side-proc.test -test.run '^$$' -test.bench 'BenchmarkProcessor/mix=(realistic|tools|tools-fresh)/proc=(floor|loop_detect)$$' -test.cpu 1 -test.benchmem -test.benchtime $(BENCH_BATCHES) && \
		 $$tmp/$$side-proc.test -test.run '^$$' -test.bench 'BenchmarkProcessor/mix=(nontool|nontool-tracked)/proc=(floor|loop_detect)$$' -test.cpu 1 -test.benchmem -test.benchtime $(BENCH_BATCHES_NONTOOL) && \
		 $$tmp/$$side-proc.test -test.run '^$$' -test.bench '^BenchmarkSpan$$' -test.cpu 1 -test.benchmem -test.benchtime $(BENCH_TIME)) >> $$out/$(PREFIX)$$side.txt; \
		(cd $$dir/processor/loopdetect/engine && \
		 $$tmp/$$side-eng.test -test.run '^$$' -test.bench '^BenchmarkObserve$$' -test.cpu 1 -test.benchmem -test.benchtime $(BENCH_TIME)) >> $$out/$(PREFIX)$$side.txt; \
		(cd $$dir/processor/loopdetect/canon && \
		 $$tmp/$$side-canon.test -test.run '^$$' -test.bench '^Benchmark(Canonical|CanonicalBytes)$$' -test.cpu 1 -test.benchmem -test.benchtime $(BENCH_TIME)) >> $$out/$(PREFIX)$$side.txt; \
	done; done; \
	$(BENCHSTAT) before=$$out/$(PREFIX)before.txt after=$$out/$(PREFIX)after.txt
