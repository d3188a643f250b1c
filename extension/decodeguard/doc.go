// Package decodeguard implements the decode_guard extension: an HTTP
// server middleware for the OTLP receiver (confighttp `middlewares`) that
// refuses JSON bodies nested deeper than max_depth while they stream in,
// before the receiver decodes them, and counts them and the bodies the
// receiver's max_request_body_size cut off.
//
//go:generate mdatagen metadata.yaml
package decodeguard // import "github.com/otelcol-loop/otelcol-loop/extension/decodeguard"
