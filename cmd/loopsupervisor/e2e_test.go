//go:build unix

package main

import (
	"context"
	"encoding/json"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// TestExporterToSupervisor sends a kill through the real alert_sink exporter
// to the real supervisor: the signed contract works end to end.
func TestExporterToSupervisor(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "2s")
	h.pids()
	inst := "inst-" + t.Name()

	f := alertsink.NewFactory()
	cfg := f.CreateDefaultConfig().(*alertsink.Config)
	cfg.Kill.Endpoint = h.url
	cfg.Kill.Secrets = []configopaque.String{testSecret}
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	require.NoError(t, cfg.Validate())
	set := exportertest.NewNopSettings(f.Type())
	exp, err := f.CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	ev := loopevent.Event{
		ID: "ld_e2e_1", Sequence: 1, Session: "sess-e2e", From: "working", To: "stuck",
		Reason: "frequent_identical", Kill: true, Explanation: "loop detected: same tool call x5 of last 10",
		DecidedAt: time.Now(), Target: target.Process{ServiceInstanceID: inst},
	}
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("execute_tool read_file")
	e := sp.Events().AppendEmpty()
	e.SetName(loopevent.EventName)
	ev.CopyTo(e.Attributes())
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))

	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit)
	assert.False(t, alive(h.agentPID))
	var r result
	require.NoError(t, json.Unmarshal([]byte(waitFile(t, h.result, time.Second)), &r))
	assert.Equal(t, "ld_e2e_1", r.EventID)
	assert.Equal(t, "ld_e2e_1.kill", r.WebhookID)
	assert.Equal(t, "sess-e2e", r.LoopSession)
}
