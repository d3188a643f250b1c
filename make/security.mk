# Reliability suite (docs/security.md): replays the attacks on the built
# collector and supervisor — unauthenticated spans, a PID-only kill, the
# all-zero trace id, six concurrent 200,000-deep requests, a crafted-shard
# flood, a flood of fresh sessions between a victim's calls, floods of
# sessions and tool names, probing the supervisor, a squatter's 410, the
# agent reading the secret —
# and asserts their outcome. About 40 s after the distribution is built.
# `make test` runs the same package through test-unit (go test ./...).
# RELIABILITY_FULL=1 measures at full scale (1 M sessions, 1 M tool names).
.PHONY: test-reliability
test-reliability: build-distribution
	OTELCOL_LOOP_BIN=$(OTELCOL) $(GO) test -count=1 -v -timeout 20m ./internal/reliability/
