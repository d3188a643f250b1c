package decodeguard // import "github.com/otelcol-loop/otelcol-loop/extension/decodeguard"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-loop/otelcol-loop/extension/decodeguard/internal/metadata"
)

// NewFactory returns the factory of the decode_guard extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		create,
		metadata.ExtensionStability,
	)
}

var errConfigType = errors.New("decode_guard: unexpected config type")

func create(_ context.Context, set extension.Settings, c component.Config) (extension.Extension, error) {
	cfg, ok := c.(*Config)
	if !ok {
		return nil, errConfigType
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &guard{maxDepth: cfg.MaxDepth, telemetry: tb}, nil
}
