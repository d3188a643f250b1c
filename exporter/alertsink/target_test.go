package alertsink

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
)

// targets renders one kill event for the kill and alerts destinations and
// returns each body's target, keyed by webhook type.
func targets(t *testing.T, p alert.Policy) map[string]map[string]any {
	t.Helper()
	ev := killEvent("ld_target_1", time.Now())
	recs, _, err := p.Records(&ev, time.Now())
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, r := range recs {
		var body struct {
			Target map[string]any `json:"target"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &body))
		out[r.Type] = body.Target
	}
	require.Len(t, out, 2, "a kill and a transition")
	return out
}

// TestAlertsCarryNoKillTarget: the alert receiver is not trusted with
// kills, so its loop.transition bodies leave out the instance id a
// supervisor kills by, while the kill keeps it; alerts.include_instance_id
// puts it back.
func TestAlertsCarryNoKillTarget(t *testing.T) {
	p := alert.Policy{Kill: true, KillTTL: time.Minute, Alerts: true}
	got := targets(t, p)
	assert.Equal(t, "inst-1", got[alert.TypeKill]["service_instance_id"])
	assert.NotContains(t, got[alert.TypeTransition], "service_instance_id")
	assert.Equal(t, map[string]any{"service_name": "agent", "pid": float64(4242), "host_name": "h1"}, got[alert.TypeTransition])

	p.AlertsInstanceID = true
	assert.Equal(t, "inst-1", targets(t, p)[alert.TypeTransition]["service_instance_id"])

	assert.False(t, createDefaultConfig().(*Config).Alerts.IncludeInstanceID, "off by default")
}
