package loopdetect

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
)

// TestOldFlatKeysStillRead: each flat key of the old layout sets the field
// of its new key, and creating the processor logs one warning for it that
// names the new key — one, although traces and logs share the detector.
func TestOldFlatKeysStillRead(t *testing.T) {
	for _, tt := range []struct {
		old    string
		value  any
		newKey string
		got    func(*Config) any
		want   any
	}{
		{"max_period", 4, "periodic_loop.max_period", func(c *Config) any { return c.PeriodicLoop.MaxPeriod }, 4},
		{"min_repetitions", 3, "periodic_loop.min_repetitions", func(c *Config) any { return c.PeriodicLoop.MinRepetitions }, 3},
		{"name_only_threshold", 6, "name_only.threshold", func(c *Config) any { return c.NameOnly.Threshold }, 6},
		{"terminal_reread", false, "terminal_reread.enabled", func(c *Config) any { return c.TerminalReread.Enabled }, false},
		{"backstop", "3h", "backstop.max_duration", func(c *Config) any { return c.Backstop.MaxDuration }, 3 * time.Hour},
		{"hysteresis", 2, "hysteresis.evaluations", func(c *Config) any { return c.Hysteresis.Evaluations }, 2},
	} {
		t.Run(tt.old, func(t *testing.T) {
			cfg := createDefaultConfig()
			require.NotEqual(t, tt.want, tt.got(cfg), "the test value must differ from the default")
			require.NoError(t, confmap.NewFromStringMap(map[string]any{tt.old: tt.value}).Unmarshal(cfg))
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, tt.got(cfg))

			warnings := createBoth(t, cfg)
			require.Len(t, warnings, 1)
			assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
			assert.Contains(t, warnings[0].Message, tt.old)
			assert.Contains(t, warnings[0].Message, tt.newKey)

			// Beside its new key, an old key is an error naming both; the
			// three old keys that are their rule's key cannot be beside it.
			parent, leaf, _ := strings.Cut(tt.newKey, ".")
			if parent == tt.old {
				return
			}
			err := confmap.NewFromStringMap(map[string]any{tt.old: tt.value, parent: map[string]any{leaf: tt.value}}).Unmarshal(createDefaultConfig())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.old+" and "+tt.newKey+" are both set")
		})
	}
}

// TestNewKeysWarnNothing: the new shape, including the three keys whose
// old form was a value, is read without a deprecation warning.
func TestNewKeysWarnNothing(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "custom").String())
	require.NoError(t, err)
	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	assert.Empty(t, createBoth(t, cfg))
}

// TestOldFlatKeysFile: testdata/config_deprecated.yaml, kept in the old
// shape, reads as the same settings in the new one; an old key beside its
// new key is an error naming both.
func TestOldFlatKeysFile(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config_deprecated.yaml"))
	require.NoError(t, err)

	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "flat").String())
	require.NoError(t, err)
	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"periodic_loop":   map[string]any{"max_period": 4, "min_repetitions": 3},
		"name_only":       map[string]any{"threshold": 6},
		"terminal_reread": map[string]any{"enabled": false},
		"backstop":        map[string]any{"max_duration": "3h"},
		"hysteresis":      map[string]any{"evaluations": 2},
	}).Unmarshal(want))
	assert.Equal(t, want.Config, cfg.Config)
	assert.Len(t, cfg.deprecated, len(renamedKeys))

	sub, err = cm.Sub(component.NewIDWithName(metadata.Type, "both").String())
	require.NoError(t, err)
	err = sub.Unmarshal(createDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_period and periodic_loop.max_period are both set")
}

// createBoth creates the traces and logs components of cfg, as a collector
// with both pipelines does, and returns the warnings logged.
func createBoth(t *testing.T, cfg *Config) []observer.LoggedEntry {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	f := NewFactory()
	tp, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	lp, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, tp.Shutdown(context.Background()))
	require.NoError(t, lp.Shutdown(context.Background()))
	return logs.All()
}
