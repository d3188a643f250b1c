package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadata"
)

// NewFactory returns the factory of the alert_sink exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

var errConfigType = errors.New("alert_sink: unexpected config type")

func helperOptions(cfg *Config, sink *alertSink) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(sink.start),
		exporterhelper.WithShutdown(sink.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(cfg.TimeoutConfig),
		exporterhelper.WithRetry(cfg.RetryConfig),
		exporterhelper.WithQueue(cfg.QueueConfig),
	}
}

func createTraces(ctx context.Context, set exporter.Settings, c component.Config) (exporter.Traces, error) {
	cfg, ok := c.(*Config)
	if !ok {
		return nil, errConfigType
	}
	sink, err := newAlertSink(cfg, set)
	if err != nil {
		return nil, err
	}
	inner, err := exporterhelper.NewTraces(ctx, set, cfg, sink.pushTraces, helperOptions(cfg, sink)...)
	if err != nil {
		return nil, err
	}
	sink.enqueue = func(ctx context.Context, recs []alert.Record) error {
		return inner.ConsumeTraces(ctx, alert.TracesCarrier(recs))
	}
	return &tracesExporter{Traces: inner, sink: sink}, nil
}

func createLogs(ctx context.Context, set exporter.Settings, c component.Config) (exporter.Logs, error) {
	cfg, ok := c.(*Config)
	if !ok {
		return nil, errConfigType
	}
	sink, err := newAlertSink(cfg, set)
	if err != nil {
		return nil, err
	}
	inner, err := exporterhelper.NewLogs(ctx, set, cfg, sink.pushLogs, helperOptions(cfg, sink)...)
	if err != nil {
		return nil, err
	}
	sink.enqueue = func(ctx context.Context, recs []alert.Record) error {
		return inner.ConsumeLogs(ctx, alert.LogsCarrier(recs))
	}
	return &logsExporter{Logs: inner, sink: sink}, nil
}
