package sdkprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// TestDefaultsMirrorCollector: New() without options decides like the
// collector processor with its default configuration.
func TestDefaultsMirrorCollector(t *testing.T) {
	cfg, ok := loopdetect.NewFactory().CreateDefaultConfig().(*loopdetect.Config)
	require.True(t, ok)
	o := defaultOptions()
	e := o.engine

	keys := cfg.Attributes
	keys.Session = cfg.Session.Keys
	assert.Equal(t, keys, o.keys)
	assert.Empty(t, o.keys.Session, "session by trace id")

	n := o.normalizer
	assert.Equal(t, cfg.Normalizer.VolatileArgKeys, n.VolatileArgKeys)
	assert.Equal(t, cfg.Normalizer.VolatileResultKeys, n.VolatileResultKeys)
	assert.Equal(t, cfg.Normalizer.TerminalKeys, n.TerminalKeys)
	assert.Equal(t, cfg.Normalizer.TerminalValues, n.TerminalValues)
	assert.Equal(t, cfg.Normalizer.MaxCanonicalBytes, n.MaxCanonicalBytes)
	assert.Equal(t, len(cfg.Normalizer.ToolOverrides), len(n.ToolOverrides))

	assert.Equal(t, cfg.MaxSessions, e.MaxSessions)
	assert.Equal(t, cfg.IdleTimeout, e.IdleTimeout)
	assert.Equal(t, cfg.HistorySize, e.HistorySize)
	assert.Equal(t, cfg.MaxPeriod, e.MaxPeriod)
	assert.Equal(t, cfg.MinRepetitions, e.MinRepetitions)
	assert.Equal(t, cfg.FrequentIdentical.Window, e.FrequentWindow)
	assert.Equal(t, cfg.FrequentIdentical.Threshold, e.FrequentThreshold)
	assert.Equal(t, cfg.NameOnlyThreshold, e.NameOnlyThreshold)
	assert.Equal(t, cfg.TerminalReread, e.TerminalReread)
	assert.Equal(t, cfg.Backstop, e.Backstop)
	assert.Equal(t, cfg.Hysteresis, e.Hysteresis)
	assert.Equal(t, cfg.Retry.RetryableClasses, e.RetryableClasses)
	assert.Equal(t, engine.RetryPolicy{
		InitialInterval: cfg.Retry.InitialInterval, BackoffRate: cfg.Retry.BackoffRate, MaxAttempts: cfg.Retry.MaxAttempts,
	}, e.RetryPolicy)
	assert.Equal(t, cfg.Retry.Tolerance, e.BackoffTolerance)
	assert.Equal(t, cfg.Lease.MaxRenewals, e.MaxLeaseRenewals)
	assert.Equal(t, cfg.Kill.Enabled, e.Kill.Enabled)
	assert.Equal(t, cfg.Kill.DryRun, e.Kill.DryRun)
	assert.Equal(t, cfg.Kill.AfterLoopCalls, e.Kill.AfterLoopCalls)
	assert.Equal(t, cfg.Kill.AllowLowConfidence, e.Kill.AllowLowConfidence)
	reasons := make([]string, 0, len(e.Kill.Reasons))
	for _, r := range e.Kill.Reasons {
		reasons = append(reasons, r.String())
	}
	assert.Equal(t, cfg.Kill.Reasons, reasons)
	assert.Equal(t, string(cfg.DigestKey), string(e.DigestKey))
	assert.Equal(t, cfg.TickInterval, DefaultTickInterval)
	assert.False(t, cfg.EventTime, "wall clock by default, like time.Now")
}
