package loopdetect

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
)

// NewFactory returns the loop_detect processor factory. Its traces and logs
// components of one processor id share a detector (shared.go).
func NewFactory() processor.Factory {
	f := &factory{detectors: map[component.ID]*sharedDetector{}}
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithLogs(f.createLogs, metadata.LogsStability),
	)
}
