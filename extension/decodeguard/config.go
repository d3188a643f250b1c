package decodeguard // import "github.com/otelcol-loop/otelcol-loop/extension/decodeguard"

import (
	"errors"
	"fmt"
)

// DefaultMaxDepth is the deepest nesting of JSON objects and arrays
// accepted by default: the JSON depth of the deepest trace or log request
// the receiver still decodes as protobuf (pdata v1.71.0 refuses protobuf
// values nested 100 messages deep: 49 nested arrayValue levels in a span
// event's attribute are 159 JSON levels; TestDefaultMaxDepthMatchesProtobuf
// in internal/decodedepth derives it). OTLP/JSON, which pdata decodes to
// any depth, is then accepted exactly as deep as protobuf. pdata v1.67.0,
// the gateway's, has no protobuf limit: there the default bounds JSON only.
const DefaultMaxDepth = 159

// maxMaxDepth bounds max_depth itself: the receiver's JSON decoder recurses
// once per level, and beyond a few thousand levels a guard guards little.
const maxMaxDepth = 10_000

// Config defines the configuration of the decode_guard extension.
type Config struct {
	// MaxDepth is the deepest nesting of JSON objects and arrays accepted
	// in a request body with Content-Type application/json (key
	// `max_depth`, default 159). A body that goes one level deeper is
	// refused with HTTP 400 as soon as that level arrives. Request size is
	// bounded by the receiver's own `max_request_body_size`.
	MaxDepth int `mapstructure:"max_depth"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{MaxDepth: DefaultMaxDepth}
}

// Validate checks the configuration; errors name the YAML key.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxDepth < 1 || c.MaxDepth > maxMaxDepth {
		errs = append(errs, fmt.Errorf("max_depth: must be between 1 and %d, got %d", maxMaxDepth, c.MaxDepth))
	}
	return errors.Join(errs...)
}
