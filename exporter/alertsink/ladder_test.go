package alertsink

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The response ladder at the kill destination: entering stuck sends a
// signed warn with a nudge, ahead of the kill; in dry-run mode the warn is
// still sent and the kill only marked.
func TestWarnPrecedesKillAndSurvivesDryRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dryRun    bool
		warnOn    []string
		wantTypes []string
	}{
		{"kill", false, []string{"stuck"}, []string{"loop.warn", "loop.kill"}},
		{"dry_run", true, []string{"stuck"}, []string{"loop.warn"}},
		{"warn_off", false, nil, []string{"loop.kill"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			url := recordingServer(t, &rec, http.StatusOK)
			cfg := testConfig(url + "/kill")
			cfg.Kill.WarnOn = tc.warnOn
			exp := startTraces(t, cfg, nopSettings())
			ev := killEvent("ld_w_2", time.Now())
			ev.Kill, ev.DryRun = !tc.dryRun, tc.dryRun
			ev.TokensTotal, ev.TokensLoop = 80_000, 30_000
			require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(ev)))

			var types []string
			for _, h := range rec.all() {
				var body struct {
					Type   string `json:"type"`
					Action string `json:"action"`
					Nudge  string `json:"nudge"`
					Tokens struct {
						Total, Loop int64
					} `json:"tokens"`
					ExpiresAt string `json:"expires_at"`
				}
				require.NoError(t, json.Unmarshal(h.body, &body))
				types = append(types, body.Type)
				assert.NotEmpty(t, h.signature, "warns are signed like kills")
				assert.NotEmpty(t, body.ExpiresAt)
				assert.Equal(t, int64(30_000), body.Tokens.Loop)
				switch body.Type {
				case "loop.warn":
					assert.Equal(t, "ld_w_2.warn", h.id)
					assert.Equal(t, "warn", body.Action)
					assert.Equal(t, "You called read_file with the same arguments 5 times and got the same result; try a different approach.", body.Nudge)
				case "loop.kill":
					assert.Equal(t, "kill", body.Action)
					assert.Empty(t, body.Nudge)
				}
			}
			assert.Equal(t, tc.wantTypes, types)
		})
	}
}

func TestWarnOnRejectsWorking(t *testing.T) {
	cfg := testConfig("http://127.0.0.1:1/kill")
	cfg.Kill.WarnOn = []string{"stuck", "working"}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `kill.warn_on[1]: state "working"`)
}

// Leaving a warned state sends a signed recover to the kill destination, so
// the supervisor lifts the nudge and any block; leaving an unwarned state,
// or warns switched off, sends none.
func TestLeavingAWarnedStateSendsRecover(t *testing.T) {
	for _, tc := range []struct {
		name      string
		from, to  string
		warnOn    []string
		wantTypes []string
	}{
		{"stuck to working", "stuck", "working", []string{"stuck"}, []string{"loop.recover"}},
		{"stuck to waiting", "stuck", "waiting", []string{"stuck"}, []string{"loop.recover"}},
		{"retrying to working, not warned", "retrying", "working", []string{"stuck"}, nil},
		{"stuck to working, warns off", "stuck", "working", nil, nil},
		{"uncertain to stuck, both warned", "uncertain", "stuck", []string{"stuck", "uncertain"}, []string{"loop.warn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			url := recordingServer(t, &rec, http.StatusOK)
			cfg := testConfig(url + "/kill")
			cfg.Kill.WarnOn = tc.warnOn
			exp := startTraces(t, cfg, nopSettings())
			ev := killEvent("ld_r_3", time.Now())
			ev.From, ev.To, ev.Reason, ev.Kill = tc.from, tc.to, "progress", false
			require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(ev)))

			var types []string
			for _, h := range rec.all() {
				var body struct {
					Type      string             `json:"type"`
					Action    string             `json:"action"`
					ExpiresAt string             `json:"expires_at"`
					Target    webhookbody.Target `json:"target"`
				}
				require.NoError(t, json.Unmarshal(h.body, &body))
				types = append(types, body.Type)
				assert.NotEmpty(t, h.signature, "recovers are signed like kills")
				if body.Type == "loop.recover" {
					assert.Equal(t, "ld_r_3.recover", h.id)
					assert.Equal(t, "recover", body.Action)
					assert.NotEmpty(t, body.ExpiresAt)
					assert.Equal(t, "inst-1", instanceNamed(t, body.Target, "inst-1"), "the supervisor matches a recover to its agent as it does a kill")
				}
			}
			assert.Equal(t, tc.wantTypes, types)
		})
	}
}

// The first telemetry of an agent instance sends one signed loop.seen to
// the kill destination, so its supervisor knows the agent is watched; a
// later batch of the same instance, or a resource without an instance id,
// sends none.
func TestFirstTelemetryOfAnInstanceSendsSeen(t *testing.T) {
	var rec recorder
	url := recordingServer(t, &rec, http.StatusOK)
	exp := startTraces(t, testConfig(url+"/kill"), nopSettings())
	batch := func(instances ...string) ptrace.Traces {
		td := ptrace.NewTraces()
		for _, inst := range instances {
			rs := td.ResourceSpans().AppendEmpty()
			if inst != "" {
				rs.Resource().Attributes().PutStr("service.instance.id", inst)
			}
			rs.Resource().Attributes().PutInt("process.pid", 4242)
			rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("chat model")
		}
		return td
	}
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch("inst-a", "", "inst-a")))
	require.NoError(t, exp.ConsumeTraces(context.Background(), batch("inst-a", "inst-b")))

	var got []string
	for _, h := range rec.all() {
		var body struct {
			Type, Action, ID string
			ExpiresAt        string             `json:"expires_at"`
			Target           webhookbody.Target `json:"target"`
		}
		require.NoError(t, json.Unmarshal(h.body, &body))
		assert.Equal(t, "loop.seen", body.Type)
		assert.Equal(t, "seen", body.Action)
		assert.Equal(t, body.ID+".seen", h.id)
		assert.NotEmpty(t, h.signature, "signed like every notice to the kill destination")
		assert.NotEmpty(t, body.ExpiresAt)
		assert.Equal(t, int64(4242), body.Target.PID)
		got = append(got, instanceNamed(t, body.Target, "inst-a", "inst-b"))
	}
	assert.Equal(t, []string{"inst-a", "inst-b"}, got)
}
