#!/usr/bin/env bash
# Instructions per benchmark operation, counted by valgrind's callgrind: the
# same count for the same binary and inputs whatever else the machine is
# doing, where this VM's wall-clock figures swing by a third. It is the
# steadier evidence for a change to compute-bound code (the canonicalizer,
# the engine's rules); it says nothing of cache misses, so the timed
# comparison (make bench-compare) stays the measure of speed.
#
#   scripts/bench-instructions.sh <test binary> <-test.bench regex> [ops] [more test flags]
#
# Run it from the benchmark's package directory (the canonicalizer's read testdata
# by relative path), on binaries built with go test -c -trimpath. It runs the
# benchmark at ops+1000 and 2*ops+1000 iterations with the GC off (the code
# measured allocates nothing, the set-up a varying amount) and prints the
# difference over ops, so set-up, warm-up and Go's b.N=1 probe cancel.
set -euo pipefail
bin=$1 re=$2 ops=${3:-64000}
shift $(($# < 3 ? $# : 3))
command -v valgrind >/dev/null || { echo "bench-instructions: valgrind not found (Debian package valgrind)" >&2; exit 2; }
# Callgrind (3.19) aborts on Go's asynchronous preemption signals and stops
# at RDTSCP (runtime.cputicks, taken under lock contention) as an illegal
# instruction, each at random in a run: both are turned off.
export GODEBUG="${GODEBUG:+$GODEBUG,}asyncpreemptoff=1,cpu.rdtscp=off"
count() {
	local n=$1
	shift
	GOGC=off valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" -test.run '^$' -test.bench "$re" \
		-test.benchtime "${n}x" -test.cpu 1 "$@" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
a=$(count $((ops + 1000)) "$@")
b=$(count $((2 * ops + 1000)) "$@")
[ -n "$a" ] && [ -n "$b" ] || { echo "bench-instructions: no count from callgrind" >&2; exit 1; }
echo $(((b - a) / ops))
