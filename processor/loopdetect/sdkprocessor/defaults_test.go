package sdkprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
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

	// One config type: the collector's is the engine's, embedded.
	assert.Equal(t, cfg.Normalizer, o.normalizer)
	assert.Equal(t, cfg.Config, e)
	assert.Empty(t, cfg.DigestKey)
	assert.Equal(t, cfg.TickInterval, DefaultTickInterval)
	assert.False(t, cfg.EventTime, "wall clock by default, like time.Now")
}
