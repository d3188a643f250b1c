// Package config holds the ready collector configurations of otelcol-loop
// (local.yaml, demo.yaml, replay.yaml, production.yaml, and container.yaml,
// the one baked into the otelcol-loop image). It has no code: its
// tests check that every file passes `otelcol-loop validate` and that the
// committed distribution sources in cmd/otelcol-loop and
// cmd/otelcol-loop-gateway match what ocb generates from their manifests
// (builder-config.yaml, cmd/otelcol-loop-gateway/builder-config.yaml).
package config
