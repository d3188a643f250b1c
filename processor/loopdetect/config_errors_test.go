package loopdetect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

// TestConfigErrorsNameKeyAndValue: every rejected setting is reported with
// its YAML key and the value that was given, whether the decoder or
// Validate catches it.
func TestConfigErrorsNameKeyAndValue(t *testing.T) {
	for _, tt := range []struct {
		name string
		conf map[string]any
		want []string // all must appear in the error
	}{
		{"duration with a space", map[string]any{"backstop": "2 hours"}, []string{"backstop", `"2 hours"`, "2h"}},
		{"duration without unit", map[string]any{"idle_timeout": "30"}, []string{"idle_timeout", `"30"`}},
		{"nested duration", map[string]any{"retry": map[string]any{"initial_interval": "two seconds"}}, []string{"retry.initial_interval", `"two seconds"`}},
		{"word for a number", map[string]any{"history_size": "ten"}, []string{"history_size", `"ten"`, "whole number"}},
		{"fraction for a count", map[string]any{"frequent_identical": map[string]any{"threshold": 4.5}}, []string{"frequent_identical.threshold", "4.5"}},
		{"word for a rate", map[string]any{"retry": map[string]any{"backoff_rate": "double"}}, []string{"retry.backoff_rate", `"double"`}},
		{"word for a bool", map[string]any{"kill": map[string]any{"dry_run": "yes please"}}, []string{"kill.dry_run", `"yes please"`}},
		{"negative backstop", map[string]any{"backstop": "-1h"}, []string{"backstop", "-1h0m0s"}},
		{"negative idle timeout", map[string]any{"idle_timeout": "-5m"}, []string{"idle_timeout", "-5m0s"}},
		{"negative retry interval", map[string]any{"retry": map[string]any{"initial_interval": "-1s"}}, []string{"retry.initial_interval", "-1s"}},
		{"backoff below one", map[string]any{"retry": map[string]any{"backoff_rate": 0.5}}, []string{"retry.backoff_rate", "0.5"}},
		{"no attempts", map[string]any{"retry": map[string]any{"max_attempts": 0}}, []string{"retry.max_attempts", "got 0"}},
		{"history too short", map[string]any{"history_size": 1}, []string{"history_size", "got 1"}},
		{"unknown kill reason", map[string]any{"kill": map[string]any{"reasons": []any{"bored"}}}, []string{"kill.reasons", `"bored"`}},
		{"zero tick", map[string]any{"tick_interval": "0s"}, []string{"tick_interval", "0s"}},
		{"tolerance of one", map[string]any{"retry": map[string]any{"tolerance": 1}}, []string{"retry.tolerance", "got 1"}},
		{"no implicit wait polls", map[string]any{"implicit_wait": map[string]any{"max_polls": 0}}, []string{"implicit_wait.max_polls", "got 0"}},
		{"implicit wait duration without unit", map[string]any{"implicit_wait": map[string]any{"max_duration": "30"}}, []string{"implicit_wait.max_duration", `"30"`}},
		{"negative per-tool implicit wait", map[string]any{"implicit_wait": map[string]any{"tools": map[string]any{"Bash": map[string]any{"max_duration": "-1m"}}}},
			[]string{"implicit_wait.tools.Bash.max_duration", "-1m0s"}},
		{"session under attributes", map[string]any{"attributes": map[string]any{"session": []any{"gen_ai.conversation.id"}}},
			[]string{"attributes.session", "gen_ai.conversation.id", "session.keys"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			err := confmap.NewFromStringMap(tt.conf).Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestWellFormedScalarsStillDecode: the checks in front of the decoder let
// every accepted spelling through.
func TestWellFormedScalarsStillDecode(t *testing.T) {
	cfg := createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"backstop":           "90m",
		"idle_timeout":       "1h",
		"history_size":       16,
		"frequent_identical": map[string]any{"window": 12, "threshold": 6.0},
		"retry":              map[string]any{"backoff_rate": 3, "tolerance": 0.25},
		"kill":               map[string]any{"dry_run": true},
		"session":            map[string]any{"keys": []any{"session.id"}},
	}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 16, cfg.HistorySize)
	assert.Equal(t, 6, cfg.FrequentIdentical.Threshold)
	assert.InDelta(t, 3.0, cfg.Retry.BackoffRate, 0)
	assert.True(t, cfg.Kill.DryRun)
	assert.Equal(t, []string{"session.id"}, cfg.keys().Session)
}
