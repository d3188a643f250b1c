// Package e2e holds the end-to-end tests of otelcol-loop: the real
// collector binary (cmd/otelcol-loop, or $OTELCOL_LOOP_BIN) running
// config/demo.yaml or config/local.yaml, the real loopsupervisor around the
// real loopagent or a real agent CLI (Claude Code, Gemini CLI) on a
// scripted model (internal/agentcli), all on loopback ports chosen at run
// time.
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
//   - TestClaudeCodeLoopIsStoppedWithinACall, TestGeminiCLILoopIsStoppedWithinACall:
//     the incident's loop in a real CLI with the supervisor's hook (Claude
//     Code: its HTTP hook and the command hook; Gemini CLI: BeforeTool and
//     AfterTool command hooks): a model that obeys the collector's nudge
//     changes course and is not killed; one that ignores it is blocked at
//     the engine's kill, then killed; without the hook, the kill at 200 ms
//     and at 5 s export.
//   - TestClaudeCodeHealthySessionsAreNeverBlocked,
//     TestGeminiCLIHealthySessionsAreNeverBlocked and the 40-call
//     Test*CodingSessionIsNeverBlocked: fix-and-test cycles, re-runs, CI
//     polled with sleeps and a background job polled until done are never
//     blocked or killed.
//   - TestClaudeCodeHookLatency: each hook's cost in Claude Code's own
//     telemetry (hook_execution_complete).
//   - TestHookFiguresDocMatchesTheTests: the figures the docs state about
//     the hook (docs/generated/hook-figures.md, written by the tests above
//     with -update) lie in the bounds the tests hold.
//   - TestKillLatency (only with LOOP_E2E_LATENCY_RUNS=N): measures the time
//     from the arrival at the collector of the span that completes the loop
//     pattern to the receipt of the kill webhook; see docs/latency.md.
//
// The package has no non-test code beyond this comment.
package e2e
