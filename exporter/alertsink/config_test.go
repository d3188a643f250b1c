package alertsink

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfigDefaults(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, 60*time.Second, cfg.Kill.TTL)
	assert.Equal(t, 5*time.Second, cfg.TimeoutConfig.Timeout)
	assert.True(t, cfg.QueueConfig.HasValue())
	assert.True(t, cfg.RetryConfig.Enabled)
	assert.Error(t, cfg.Validate(), "the default has no destination")
}

func TestConfigGood(t *testing.T) {
	cfg := loadConfig(t, "")
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "http://127.0.0.1:8787/kill", cfg.Kill.Endpoint)

	full := loadConfig(t, "full")
	require.NoError(t, full.Validate())
	assert.Equal(t, 45*time.Second, full.Kill.TTL)
	assert.Len(t, full.Kill.Secrets, 2)
	assert.Equal(t, []string{"stuck", "uncertain"}, full.Alerts.States)
	assert.Equal(t, "file_storage/alerts", full.QueueConfig.Get().StorageID.String())
	assert.Equal(t, 3*time.Second, full.TimeoutConfig.Timeout)

	require.NoError(t, loadConfig(t, "alerts_only").Validate())

	am := loadConfig(t, "alertmanager")
	require.NoError(t, am.Validate())
	assert.Equal(t, []string{"stuck"}, am.Alertmanager.States)
	assert.Equal(t, 15*time.Minute, am.Alertmanager.UncertainAfter)
	assert.Equal(t, 2*time.Hour, am.Alertmanager.ResolveAfter)
	assert.Equal(t, map[string]string{"team": "agents"}, am.Alertmanager.Labels)
}

func TestAlertmanagerDefaults(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.Equal(t, []string{"stuck", "uncertain"}, cfg.Alertmanager.States)
	assert.Equal(t, 10*time.Minute, cfg.Alertmanager.UncertainAfter)
	assert.Equal(t, time.Hour, cfg.Alertmanager.ResolveAfter)
	cfg.Alertmanager.Endpoint = "http://127.0.0.1:9093"
	require.NoError(t, cfg.Validate(), "an alertmanager alone is a destination")
}

func TestConfigBad(t *testing.T) {
	for name, wantKey := range map[string]string{
		"bad_no_endpoint":   "kill.endpoint",
		"bad_plain_http":    "kill.endpoint: plain http is allowed only to a loopback address",
		"bad_no_secret":     "kill.secrets",
		"bad_secret_format": "kill.secrets[0]",
		"bad_three_secrets": "kill.secrets: at most 2",
		"bad_ttl":           "kill.ttl",
		"bad_state":         "alerts.states[1]",
		"bad_userinfo":      "alerts.endpoint",
		"bad_shared_secret": "alerts.secrets[0]: must differ from every kill.secrets",
		"bad_am_state":      `alertmanager.states[0]: state "working"`,
		"bad_am_trace_url":  "alertmanager.trace_url: unknown placeholder {traceid}",
		"bad_am_label":      `alertmanager.labels: "session" is set by the destination itself`,
		"bad_am_resolve":    "alertmanager.resolve_after",
	} {
		t.Run(name, func(t *testing.T) {
			err := loadConfig(t, name).Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), wantKey)
			assert.NotContains(t, err.Error(), "hunter2", "a secret leaked into a config error")
			assert.NotContains(t, err.Error(), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		})
	}
}

func TestLoopbackRule(t *testing.T) {
	for ep, ok := range map[string]bool{
		"http://127.0.0.1:1/x":    true,
		"http://127.9.9.9/x":      true,
		"http://[::1]:8787/x":     true,
		"http://localhost:80/x":   true,
		"http://10.0.0.1/x":       false,
		"http://0.0.0.0/x":        false,
		"http://example.com/x":    false,
		"https://example.com/x":   true,
		"ftp://127.0.0.1/x":       false,
		"127.0.0.1:8787":          false,
		"http://127.0.0.1.nip.io": false,
	} {
		assert.Equal(t, ok, checkEndpoint(ep) == nil, ep)
	}
}

func TestSecretIsOpaque(t *testing.T) {
	cfg := loadConfig(t, "full")
	s := cfg.Kill.Secrets[0]
	assert.Equal(t, "[REDACTED]", s.String())
	var _ configopaque.String = s //nolint:staticcheck // QF1011: asserts the field keeps the opaque type
}
