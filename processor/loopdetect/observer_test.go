package loopdetect

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
)

// TestObserveCallsSeesEveryCallOnce: the observer set on a config sees
// each tool call the components read, marks a redelivered span as not
// counted, and gets the transitions on the call that caused them.
func TestObserveCallsSeesEveryCallOnce(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.EventTime = true
	type seen struct {
		tool     string
		counted  bool
		nameOnly bool
		trans    int
		kill     bool
	}
	var got []seen
	ObserveCalls(cfg, func(o *Observation) {
		s := seen{tool: o.Tool, counted: o.Counted, nameOnly: o.NameOnly, trans: len(o.Transitions)}
		for _, tr := range o.Transitions {
			s.kill = s.kill || tr.Kill
		}
		got = append(got, s)
	})
	f := NewFactory()
	ctx := context.Background()
	p, err := f.CreateTraces(ctx, processortest.NewNopSettings(f.Type()), cfg, new(consumertest.TracesSink))
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, nil))
	defer func() { require.NoError(t, p.Shutdown(ctx)) }()

	batches := []struct {
		seq  uint64
		tool string
		args string
	}{
		{1, "read_file", `{"path":"a.go"}`},
		{1, "read_file", `{"path":"a.go"}`}, // the same span delivered again
		{2, "list", ""},
	}
	for i := 0; i < 5; i++ {
		batches = append(batches, struct {
			seq  uint64
			tool string
			args string
		}{uint64(10 + i), "bash", `{"command":"gh issue list"}`})
	}
	for i, b := range batches {
		require.NoError(t, p.ConsumeTraces(ctx, toolTraces(1, b.seq, base.Add(time.Duration(i)*9*time.Second), b.tool, b.args, "", nil)))
	}
	require.Len(t, got, len(batches))
	require.Equal(t, seen{tool: "read_file", counted: true}, got[0])
	require.Equal(t, seen{tool: "read_file", counted: false}, got[1])
	require.Equal(t, seen{tool: "list", counted: true, nameOnly: true}, got[2])
	kills := 0
	for _, s := range got {
		if s.kill {
			kills++
		}
	}
	require.Equal(t, 1, kills)
	require.True(t, got[len(got)-1].kill, "the 5th identical call triggers the kill")
}
