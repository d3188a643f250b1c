// Package config holds the ready collector configurations of otelcol-loop
// (local.yaml, demo.yaml, replay.yaml, production.yaml). It has no code: its
// tests check that every file passes `otelcol-loop validate` and that the
// committed distribution sources in cmd/otelcol-loop match what ocb
// generates from builder-config.yaml.
package config
