package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
)

// destination is the part of a receiver that differs between kinds: how a
// record becomes an HTTP request. Delivery, outcomes, retries and the queue
// are shared.
type destination interface {
	newRequest(ctx context.Context, r *alert.Record, now time.Time) (*http.Request, error)
}

// receiver is one destination at run time with its HTTP client.
type receiver struct {
	name string
	dest destination
	// shown is the endpoint as delivery errors name it (endpointForLogs).
	shown    string
	client   *http.Client
	disabled atomic.Bool
	// goneKeys verify a 410 answer (stdwebhook.VerifyGone): only a
	// receiver holding the destination's secret may switch it off. Empty
	// for unsigned destinations, whose 410s are retried like a 503.
	goneKeys [][]byte
}

// addReceiver builds the HTTP client of one destination and registers it
// under name.
func (s *alertSink) addReceiver(ctx context.Context, host component.Host, name, endpoint string, hc *confighttp.ClientConfig, dest destination, keys [][]byte) error {
	client, err := hc.ToClient(ctx, host.GetExtensions(), s.set)
	if err != nil {
		return fmt.Errorf("%s: creating HTTP client: %w", name, err)
	}
	// A webhook is never re-sent to another place: a redirect is an
	// answer, counted and not followed.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.dests[name] = &receiver{name: name, dest: dest, shown: endpointForLogs(endpoint), client: client, goneKeys: keys}
	return nil
}
