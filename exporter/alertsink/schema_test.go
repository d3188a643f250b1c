package alertsink

import (
	"encoding/json"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
)

// TestBodyMatchesSchema keeps docs/webhook.schema.json and the rendered
// body in step: every required key present, no key the schema lacks.
func TestBodyMatchesSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhook.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))

	ev := killEvent("ld_schema_1", time.Now())
	ev.FirstLoopSpanID, ev.DelayCalls, ev.DelaySeconds, ev.Client = "a1a2a3a4a5a6a7a8", 5, 12.5, "genai_semconv"
	ev.TokensTotal, ev.TokensLoop = 50_000, 20_000
	p := alert.Policy{Kill: true, KillTTL: time.Minute, Alerts: true, WarnOn: map[string]bool{"stuck": true}}
	recs, _, err := p.Records(&ev, "", time.Now())
	require.NoError(t, err)
	require.Len(t, recs, 3, "warn, kill and transition")
	back := killEvent("ld_schema_2", time.Now())
	back.From, back.To, back.Kill = "stuck", "working", false
	more, _, err := p.Records(&back, "", time.Now())
	require.NoError(t, err)
	recs = append(recs, more...)
	res := pcommon.NewMap()
	res.PutStr("service.instance.id", "inst-schema")
	seen, ok, err := p.SeenRecord(alert.NewSightings(4), res, time.Now())
	require.NoError(t, err)
	require.True(t, ok)
	recs = append(recs, seen)
	require.Len(t, recs, 6, "warn, kill, transition, recover, transition, seen")
	for _, r := range recs {
		var body map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Body, &body))
		for _, k := range schema.Required {
			assert.Contains(t, body, k, r.Type)
		}
		for k, v := range body {
			prop, ok := schema.Properties[k]
			require.True(t, ok, "body key %q missing from the schema", k)
			var sub struct {
				Properties map[string]any `json:"properties"`
			}
			_ = json.Unmarshal(prop, &sub)
			if sub.Properties == nil {
				continue
			}
			var obj map[string]any
			require.NoError(t, json.Unmarshal(v, &obj))
			for kk := range obj {
				assert.Contains(t, sub.Properties, kk, "body key %s.%s missing from the schema", k, kk)
			}
		}
		if r.Type != webhookbody.TypeTransition {
			assert.Contains(t, body, "expires_at")
			assert.Contains(t, body, "action")
		} else {
			assert.NotContains(t, body, "expires_at")
		}
	}
}
