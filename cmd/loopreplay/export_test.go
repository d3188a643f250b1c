package main

import (
	"context"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// exportProcessed writes what the processor forwards for in, as a file
// exporter would: tool spans with their transition events, timer spans.
func exportProcessed(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	batches, err := replay.ReadOTLPJSON(f, in)
	if err != nil {
		return err
	}
	cfg, err := replay.Config(nil)
	if err != nil {
		return err
	}
	res, err := replay.Run(context.Background(), cfg, batches)
	if err != nil {
		return err
	}
	var m ptrace.JSONMarshaler
	var buf []byte
	for _, td := range res.Output {
		b, err := m.MarshalTraces(td)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	return os.WriteFile(out, buf, 0o600)
}
