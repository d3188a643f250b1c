package loopdetect

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	custom := createDefaultConfig()
	custom.Session.Keys = []string{"gen_ai.conversation.id", "session.id"}
	custom.MaxSessions = 5000
	custom.IdleTimeout = 10 * time.Minute
	custom.HistorySize = 16
	custom.PeriodicLoop = engine.PeriodicLoopConfig{MaxPeriod: 4, MinRepetitions: 3}
	custom.FrequentIdentical = engine.FrequentIdenticalConfig{Window: 12, Threshold: 6}
	custom.NameOnly.Threshold = 14
	custom.TerminalReread.Enabled = false
	custom.LongCycle.MinCalls = 6
	custom.CycleWithoutResults = engine.CycleWithoutResultsConfig{MaxPeriod: 4, Repetitions: 3}
	custom.FailureStreak = engine.FailureStreakConfig{Threshold: 9, UnknownToolThreshold: 2}
	custom.Normalizer.UnknownToolMarkers = []string{"no such command"}
	custom.Backstop.MaxDuration = 3 * time.Hour
	custom.Hysteresis.Evaluations = 2
	custom.Retry = engine.RetryConfig{
		RetryableClasses: []string{"rate_limit", "503"},
		RetryPolicy:      engine.RetryPolicy{InitialInterval: time.Second, BackoffRate: 3, MaxAttempts: 4},
		Tolerance:        0.1,
	}
	custom.Lease.MaxRenewals = 1
	custom.Kill = engine.KillPolicy{Enabled: true, DryRun: true, Reasons: []engine.Reason{engine.ReasonBackstop}, AfterLoopCalls: 8}
	custom.Normalizer.ToolOverrides = map[string]canon.KeyOverride{"clock": {Keep: []string{"timestamp"}}}
	custom.DigestKey = "s3cr3t"
	custom.TickInterval = 5 * time.Second

	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: custom},
		{id: component.NewIDWithName(metadata.Type, "bad_history"), wantErr: "history_size must be in 2..1024, got 1"},
		{id: component.NewIDWithName(metadata.Type, "bad_reason"), wantErr: `kill.reasons[0]' unknown reason "bored"`},
		{id: component.NewIDWithName(metadata.Type, "bad_window"), wantErr: "frequent_identical: threshold (5) must be ≤ window (40) ≤ history_size (12)"},
		{id: component.NewIDWithName(metadata.Type, "bad_streak"), wantErr: "failure_streak: threshold (-1)"},
		{id: component.NewIDWithName(metadata.Type, "bad_tick"), wantErr: "tick_interval must be positive, got 0s"},
		{id: component.NewIDWithName(metadata.Type, "no_tool_match"), wantErr: "attributes: tool_call and tool_span_names are both empty"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			// A wrong value is an error of decoding (a reason code) or of
			// validation (everything else); both name the key.
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

// TestEngineConfigAddsTheDigestKey: the engine gets the processor's
// settings as they are, plus the opaque digest key as bytes.
func TestEngineConfigAddsTheDigestKey(t *testing.T) {
	cfg := createDefaultConfig()
	assert.Equal(t, engine.DefaultConfig(), cfg.engineConfig())
	cfg.DigestKey = "k"
	cfg.PeriodicLoop.MaxPeriod = 2
	want := engine.DefaultConfig()
	want.PeriodicLoop.MaxPeriod, want.DigestKey = 2, []byte("k")
	assert.Equal(t, want, cfg.engineConfig())
}

// TestConfigRoundTrips: the configuration written out (as `otelcol-loop
// print-config` does) reads back into the same configuration, so every
// rule's settings are written under the rule's key, never in the old flat
// shape, and reason codes are written as codes.
func TestConfigRoundTrips(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "custom").String())
	require.NoError(t, err)
	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))

	out := confmap.New()
	require.NoError(t, out.Marshal(cfg))
	raw := out.ToStringMap()
	for _, key := range []string{"periodic_loop::max_period", "periodic_loop::min_repetitions", "name_only::threshold", "terminal_reread::enabled", "backstop::max_duration", "hysteresis::evaluations"} {
		assert.True(t, out.IsSet(key), "every rule's settings are written under its key: %s", key)
	}
	for _, old := range renamedKeys {
		_, isMap := raw[old.old].(map[string]any)
		assert.True(t, !out.IsSet(old.old) || isMap, "the old flat key %s is not written", old.old)
	}
	assert.NotContains(t, raw, "config")
	assert.Equal(t, []any{"backstop"}, out.Get("kill::reasons"))
	assert.Equal(t, 3.0, out.Get("retry::backoff_rate"))

	assert.Equal(t, "[REDACTED]", out.Get("digest_key"), "the digest key is never written out")

	back := createDefaultConfig()
	require.NoError(t, out.Unmarshal(back))
	back.DigestKey = cfg.DigestKey
	assert.Equal(t, cfg, back)
}

// TestRequireDigestKey: with require_digest_key an empty digest_key (an
// unset ${env:LOOPDETECT_DIGEST_KEY}) is a configuration error naming the
// key and the variable; a set key passes and is never printed. Off by
// default, so local configurations keep working without one.
func TestRequireDigestKey(t *testing.T) {
	const key = "digest-key-that-must-not-be-printed"
	for _, tt := range []struct {
		name    string
		conf    map[string]any
		wantErr bool
	}{
		{"default: not required", map[string]any{}, false},
		{"not required, empty", map[string]any{"digest_key": ""}, false},
		{"required, missing", map[string]any{"require_digest_key": true}, true},
		{"required, empty", map[string]any{"require_digest_key": true, "digest_key": ""}, true},
		{"required, set", map[string]any{"require_digest_key": true, "digest_key": key}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			require.NoError(t, confmap.NewFromStringMap(tt.conf).Unmarshal(cfg))
			err := confmap.Validate(cfg)
			if !tt.wantErr {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range []string{"digest_key is empty", "require_digest_key", "LOOPDETECT_DIGEST_KEY"} {
				assert.ErrorContains(t, err, want)
			}
		})
	}
	assert.False(t, createDefaultConfig().RequireDigestKey)
	// A wrong key elsewhere reports its own error, without the digest key.
	cfg := createDefaultConfig()
	cfg.RequireDigestKey, cfg.DigestKey, cfg.TickInterval = true, key, 0
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), key)
	assert.NotContains(t, err.Error(), "digest_key")
}

// TestImplicitWaitConfigReachesTheExtractor: implicit_wait decodes, with
// its per-tool overrides, and the extractor's keys carry it, so the calls
// read as polls are the ones the engine grants leases.
func TestImplicitWaitConfigReachesTheExtractor(t *testing.T) {
	cfg := createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"implicit_wait": map[string]any{
		"max_duration": "45m",
		"status_tools": []any{map[string]any{"tool": "job_status", "id_key": "job"}},
		"tools": map[string]any{
			"Bash":              map[string]any{"max_polls": 120},
			"run_shell_command": map[string]any{"enabled": false},
		},
	}}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	iw := cfg.ImplicitWait
	require.Equal(t, 45*time.Minute, iw.MaxDuration)
	require.Equal(t, 60, iw.MaxPolls, "unset keys keep their defaults")
	require.Equal(t, []engine.StatusTool{{Tool: "job_status", IDKey: "job"}}, iw.StatusTools)
	require.Equal(t, 120, iw.Tools["Bash"].MaxPolls)
	require.NotNil(t, iw.Tools["run_shell_command"].Enabled)
	require.False(t, *iw.Tools["run_shell_command"].Enabled)
	require.Equal(t, iw, cfg.keys().Waits)
}
