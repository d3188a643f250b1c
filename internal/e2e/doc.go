// Package e2e holds the end-to-end tests of otelcol-loop: the real
// collector binary (cmd/otelcol-loop, or $OTELCOL_LOOP_BIN) running
// config/demo.yaml, the real loopsupervisor around the real loopagent, all on
// loopback ports chosen at run time.
//
//   - TestSeed000LoopIsKilled: the seed-000 bash loop is detected (stuck,
//     reason and call index), exactly one verified kill reaches the
//     supervisor, the agent process is gone, the supervisor writes its error
//     result line, and the transition events are in the exported traces.
//   - TestPaginationIsHealthy: a healthy paginating agent is never judged
//     stuck and finishes with its own ok line.
//   - TestReadmeStepsKillWithDefaults: the README's "Watch your own agent"
//     steps, config/local.yaml and the supervisor's defaults, end in a
//     delivered kill (fixed default ports replaced only where taken);
//     TestSupervisorDefaultMatchesLocalConfig checks the address agreement.
//   - TestKillLatency (only with LOOP_E2E_LATENCY_RUNS=N): measures the time
//     from the arrival at the collector of the span that completes the loop
//     pattern to the receipt of the kill webhook; see docs/latency.md.
//
// The package has no non-test code beyond this comment.
package e2e
