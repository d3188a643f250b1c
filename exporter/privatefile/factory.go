package privatefile // import "github.com/otelcol-loop/otelcol-loop/exporter/privatefile"

import (
	"context"
	"errors"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.uber.org/zap"
)

// NewFactory returns the factory of the `file` exporter (the contrib
// exporter's type, configuration and stability) and restricts the process
// umask (see the package doc).
func NewFactory() exporter.Factory {
	restrictUmask()
	inner := fileexporter.NewFactory()
	return exporter.NewFactory(
		inner.Type(),
		inner.CreateDefaultConfig,
		exporter.WithTraces(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
			e, err := inner.CreateTraces(ctx, set, cfg)
			if err != nil {
				return nil, err
			}
			g, err := newGuard(cfg, set.Logger)
			return tracesExporter{Traces: e, guard: g}, err
		}, inner.TracesStability()),
		exporter.WithMetrics(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
			e, err := inner.CreateMetrics(ctx, set, cfg)
			if err != nil {
				return nil, err
			}
			g, err := newGuard(cfg, set.Logger)
			return metricsExporter{Metrics: e, guard: g}, err
		}, inner.MetricsStability()),
		exporter.WithLogs(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
			e, err := inner.CreateLogs(ctx, set, cfg)
			if err != nil {
				return nil, err
			}
			g, err := newGuard(cfg, set.Logger)
			return logsExporter{Logs: e, guard: g}, err
		}, inner.LogsStability()),
	)
}

var (
	errConfigType = errors.New("file: unexpected config type")
	// errRotation refuses rotation: the contrib exporter's rotating writer
	// chmods every file it opens to 0644, past the umask.
	errRotation = errors.New("file: rotation is not supported in this distribution: the rotating writer makes every file it opens mode 0644, readable by every local user, and the files hold the agents' instance ids; leave `rotation` out and rotate with an external tool that keeps mode 0600 (logrotate's `create 0600`)")
)

func newGuard(cfg component.Config, logger *zap.Logger) (guard, error) {
	c, ok := cfg.(*fileexporter.Config)
	if !ok {
		return guard{}, errConfigType
	}
	if c.Rotation != nil {
		return guard{}, errRotation
	}
	// With group_by the path is a pattern, one file per resource: those
	// files are created under the umask only.
	grouped := c.GroupBy != nil && c.GroupBy.Enabled
	return guard{path: c.Path, grouped: grouped, logger: logger}, nil
}

// The three signals' exporters: the contrib exporter, started inside the
// guard.

type tracesExporter struct {
	exporter.Traces
	guard guard
}

func (e tracesExporter) Start(ctx context.Context, host component.Host) error {
	return e.guard.start(func() error { return e.Traces.Start(ctx, host) })
}

type metricsExporter struct {
	exporter.Metrics
	guard guard
}

func (e metricsExporter) Start(ctx context.Context, host component.Host) error {
	return e.guard.start(func() error { return e.Metrics.Start(ctx, host) })
}

type logsExporter struct {
	exporter.Logs
	guard guard
}

func (e logsExporter) Start(ctx context.Context, host component.Host) error {
	return e.guard.start(func() error { return e.Logs.Start(ctx, host) })
}
