// Package reliability replays attacks on the built collector
// (bin/otelcol-loop) and supervisor (loopsupervisor) and asserts their
// outcome: who can make the product stop which agent, and what a sender
// can make it spend. `make test-reliability` runs it verbose; `make test`
// runs it with the rest. RELIABILITY_FULL=1 adds the measurements at full
// scale (1 M sessions, 1 M tool names), which take minutes.
package reliability
