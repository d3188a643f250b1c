package loopdetect

import (
	"strings"
	"testing"
	"time"

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
		{"duration with a space", map[string]any{"backstop": map[string]any{"max_duration": "2 hours"}}, []string{"backstop.max_duration", `"2 hours"`, "2h"}},
		{"duration without unit", map[string]any{"idle_timeout": "30"}, []string{"idle_timeout", `"30"`}},
		{"nested duration", map[string]any{"retry": map[string]any{"initial_interval": "two seconds"}}, []string{"retry.initial_interval", `"two seconds"`}},
		{"word for a number", map[string]any{"history_size": "ten"}, []string{"history_size", `"ten"`, "whole number"}},
		{"fraction for a count", map[string]any{"frequent_identical": map[string]any{"threshold": 4.5}}, []string{"frequent_identical.threshold", "4.5"}},
		{"word for a rate", map[string]any{"retry": map[string]any{"backoff_rate": "double"}}, []string{"retry.backoff_rate", `"double"`}},
		{"word for a bool", map[string]any{"kill": map[string]any{"dry_run": "yes please"}}, []string{"kill.dry_run", `"yes please"`}},
		{"negative backstop", map[string]any{"backstop": map[string]any{"max_duration": "-1h"}}, []string{"backstop.max_duration", "-1h0m0s"}},
		{"negative idle timeout", map[string]any{"idle_timeout": "-5m"}, []string{"idle_timeout", "-5m0s"}},
		{"negative retry interval", map[string]any{"retry": map[string]any{"initial_interval": "-1s"}}, []string{"retry.initial_interval", "-1s"}},
		{"backoff below one", map[string]any{"retry": map[string]any{"backoff_rate": 0.5}}, []string{"retry.backoff_rate", "0.5"}},
		{"no attempts", map[string]any{"retry": map[string]any{"max_attempts": 0}}, []string{"retry.max_attempts", "got 0"}},
		{"history too short", map[string]any{"history_size": 1}, []string{"history_size", "got 1"}},
		{"unknown kill reason", map[string]any{"kill": map[string]any{"reasons": []any{"bored"}}}, []string{"kill.reasons[0]", `"bored"`}},
		{"zero tick", map[string]any{"tick_interval": "0s"}, []string{"tick_interval", "0s"}},
		{"tolerance of one", map[string]any{"retry": map[string]any{"tolerance": 1}}, []string{"retry.tolerance", "got 1"}},
		{"no implicit wait polls", map[string]any{"implicit_wait": map[string]any{"max_polls": 0}}, []string{"implicit_wait.max_polls", "got 0"}},
		{"implicit wait duration without unit", map[string]any{"implicit_wait": map[string]any{"max_duration": "30"}}, []string{"implicit_wait.max_duration", `"30"`}},
		{"negative per-tool implicit wait", map[string]any{"implicit_wait": map[string]any{"tools": map[string]any{"Bash": map[string]any{"max_duration": "-1m"}}}},
			[]string{"implicit_wait.tools.Bash.max_duration", "-1m0s"}},
		{"periodic loop period 0", map[string]any{"periodic_loop": map[string]any{"max_period": 0}}, []string{"periodic_loop.max_period", "got 0"}},
		{"negative name-only threshold", map[string]any{"name_only": map[string]any{"threshold": -1}}, []string{"name_only.threshold", "got -1"}},
		{"word for terminal re-read", map[string]any{"terminal_reread": map[string]any{"enabled": "maybe"}}, []string{"terminal_reread.enabled", `"maybe"`}},
		{"no hysteresis evaluations", map[string]any{"hysteresis": map[string]any{"evaluations": 0}}, []string{"hysteresis.evaluations", "got 0"}},
		{"no canonical bytes", map[string]any{"normalizer": map[string]any{"max_canonical_bytes": 0}}, []string{"normalizer", "max_canonical_bytes", "got 0"}},
		{"old flat duration with a space", map[string]any{"backstop": "2 hours"}, []string{"backstop.max_duration", `"2 hours"`, "2h"}},
		{"old flat period 0", map[string]any{"max_period": 0}, []string{"periodic_loop.max_period", "got 0"}},
		{"session under attributes", map[string]any{"attributes": map[string]any{"session": []any{"gen_ai.conversation.id"}}},
			[]string{"attributes.session", "gen_ai.conversation.id", "session.keys"}},
		{"subagent session without a key", map[string]any{"attributes": map[string]any{"subagent_session": []any{map[string]any{"client": "claude_code"}}}},
			[]string{"attributes", "subagent_session[0]", "client and key are required"}},
		{"subagent spans without the main agent", map[string]any{"attributes": map[string]any{"subagent_spans": []any{map[string]any{"name": "qwen-code.tool"}}}},
			[]string{"attributes", "subagent_spans[0]", "name and main_agent are required"}},
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
		"backstop":           map[string]any{"max_duration": "90m"},
		"idle_timeout":       "1h",
		"history_size":       16,
		"frequent_identical": map[string]any{"window": 12, "threshold": 6.0},
		"retry":              map[string]any{"backoff_rate": 3, "tolerance": 0.25},
		"kill":               map[string]any{"dry_run": true},
		"session":            map[string]any{"keys": []any{"session.id"}},
	}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 90*time.Minute, cfg.Backstop.MaxDuration)
	assert.Equal(t, 16, cfg.HistorySize)
	assert.Equal(t, 6, cfg.FrequentIdentical.Threshold)
	assert.InDelta(t, 3.0, cfg.Retry.BackoffRate, 0)
	assert.True(t, cfg.Kill.DryRun)
	assert.Equal(t, []string{"session.id"}, cfg.keys().Session)
}

// TestValidateReportsEachErrorOnce: confmap.Validate calls the Validate of
// the processor's configuration and of every part it embeds or nests (the
// engine's, the normalizer's, the attribute lists'); none of them calls
// another's, so each wrong setting is reported exactly once.
func TestValidateReportsEachErrorOnce(t *testing.T) {
	cfg := createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"history_size":  1,
		"backstop":      map[string]any{"max_duration": "-1h"},
		"normalizer":    map[string]any{"max_canonical_bytes": 0},
		"attributes":    map[string]any{"tool_call": []any{}, "tool_span_names": []any{}},
		"tick_interval": "0s",
	}).Unmarshal(cfg))
	err := confmap.Validate(cfg)
	require.Error(t, err)
	for _, msg := range []string{
		"history_size must be in 2..1024, got 1",
		"backstop.max_duration must not be negative",
		"max_canonical_bytes must be ≥ 1, got 0",
		"tool_call and tool_span_names are both empty",
		"tick_interval must be positive, got 0s",
	} {
		assert.Equal(t, 1, strings.Count(err.Error(), msg), "%q in %v", msg, err)
	}
}
