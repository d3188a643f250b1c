package alertsink

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// targets renders one kill event for the kill and alerts destinations and
// returns each body's target, keyed by webhook type.
func targets(t *testing.T, p alert.Policy) map[string]map[string]any {
	t.Helper()
	ev := killEvent("ld_target_1", time.Now())
	recs, _, err := p.Records(&ev, "", time.Now())
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

// TestBodiesNameTheAgentOnlyByAKeyedDigest: the instance id is the kill
// capability, so no body carries it: the kill names the agent by its
// digest under the kill destination's key, the alert under the alerts
// destination's (none when unsigned); alerts.include_instance_id puts the
// raw id back into alerts only.
func TestBodiesNameTheAgentOnlyByAKeyedDigest(t *testing.T) {
	killKey, alertsKey := []byte("kill key"), []byte("alerts key")
	p := alert.Policy{Kill: true, KillTTL: time.Minute, Alerts: true, KillKey: killKey}
	got := targets(t, p)
	assert.NotContains(t, got[webhookbody.TypeKill], "service_instance_id")
	assert.Equal(t, webhookbody.DigestInstance(killKey, "inst-1"), got[webhookbody.TypeKill]["instance_digest"])
	assert.Equal(t, map[string]any{"service_name": "agent", "pid": float64(4242), "host_name": "h1"}, got[webhookbody.TypeTransition], "an unsigned alert names no instance at all")

	p.AlertsKey = alertsKey
	assert.Equal(t, webhookbody.DigestInstance(alertsKey, "inst-1"), targets(t, p)[webhookbody.TypeTransition]["instance_digest"], "under the alerts key: the alert receiver cannot make a kill's digest")

	p.AlertsInstanceID = true
	assert.Equal(t, "inst-1", targets(t, p)[webhookbody.TypeTransition]["service_instance_id"])
	assert.NotContains(t, targets(t, p)[webhookbody.TypeKill], "service_instance_id")

	assert.False(t, createDefaultConfig().(*Config).Alerts.IncludeInstanceID, "off by default")
}

// With kill.only_named_agents, an agent's notices go to the kill
// destination only when its resource names that destination.
func TestOnlyNamedAgentsReachTheKillDestination(t *testing.T) {
	p := alert.Policy{Kill: true, KillTTL: time.Minute, KillKey: []byte("k"), KillListen: "127.0.0.1:8788"}
	ev := killEvent("ld_route_1", time.Now())
	for _, tc := range []struct {
		route string
		want  int
	}{{"127.0.0.1:8788", 1}, {"127.0.0.1:8787", 0}, {"", 0}} {
		recs, _, err := p.Records(&ev, tc.route, time.Now())
		require.NoError(t, err)
		assert.Len(t, recs, tc.want, "route %q", tc.route)
	}
	p.KillListen = ""
	recs, _, err := p.Records(&ev, "", time.Now())
	require.NoError(t, err)
	assert.Len(t, recs, 1, "without the setting every agent's notices go there")
}
