package decodeguard // import "github.com/otelcol-loop/otelcol-loop/extension/decodeguard"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-loop/otelcol-loop/extension/decodeguard/internal/metadata"
)

var (
	reasonDepth = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "depth")))
	reasonSize  = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "size")))
)

// guard is the decode_guard extension.
type guard struct {
	maxDepth  int
	telemetry *metadata.TelemetryBuilder
}

var _ extensionmiddleware.HTTPServer = (*guard)(nil)

func (*guard) Start(context.Context, component.Host) error { return nil }

func (g *guard) Shutdown(context.Context) error {
	g.telemetry.Shutdown()
	return nil
}

// GetHTTPHandler wraps the receiver's handler. confighttp runs it after
// authentication, the size limit and decompression, so the body it sees is
// the decoded one, already cut at max_request_body_size.
func (g *guard) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &body{ReadCloser: r.Body, ctx: r.Context(), g: g, json: isJSON(r.Header.Get("Content-Type")), max: g.maxDepth}
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// DepthError is the error a refused body's reader returns; the OTLP
// receiver answers it with HTTP 400 and this text as the status message.
type DepthError struct{ Max int }

func (e *DepthError) Error() string {
	return fmt.Sprintf("request refused: JSON nested deeper than %d levels (decode_guard max_depth)", e.Max)
}

// body scans a request body as the receiver reads it: nothing is copied or
// held, and a body nested too deep ends at the first byte past max_depth.
type body struct {
	io.ReadCloser
	ctx     context.Context
	g       *guard
	json    bool
	max     int
	depth   int
	inStr   bool
	escaped bool
	err     error
	counted bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	if b.json && n > 0 {
		if i := b.scan(p[:n]); i >= 0 {
			b.err = &DepthError{Max: b.max}
			b.g.telemetry.DecodeguardRequestsRefused.Add(b.ctx, 1, reasonDepth)
			return i, b.err
		}
	}
	var tooLarge *http.MaxBytesError
	if err != nil && !b.counted && errors.As(err, &tooLarge) {
		b.counted = true
		b.g.telemetry.DecodeguardRequestsRefused.Add(b.ctx, 1, reasonSize)
	}
	return n, err
}

// scan follows the nesting of p, continuing from the previous chunk, and
// returns the index of the first byte that opens a level deeper than max,
// or -1. Brackets inside strings do not count. The JSON is not validated:
// the receiver's decoder refuses what is malformed.
func (b *body) scan(p []byte) int {
	for i, c := range p {
		if b.inStr {
			switch {
			case b.escaped:
				b.escaped = false
			case c == '\\':
				b.escaped = true
			case c == '"':
				b.inStr = false
			}
			continue
		}
		switch c {
		case '"':
			b.inStr = true
		case '{', '[':
			b.depth++
			if b.depth > b.max {
				return i
			}
		case '}', ']':
			b.depth--
		}
	}
	return -1
}
