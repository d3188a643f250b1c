package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// The kill and alerts destinations: both are signed Standard Webhooks and
// differ only in their configuration and in which records the policy sends
// them.

// signedWebhook is a Standard Webhooks receiver (the supervisor's kill
// endpoint, a team's alert webhook).
type signedWebhook struct {
	endpoint string
	keys     [][]byte
}

func (w *signedWebhook) newRequest(ctx context.Context, r *alert.Record, now time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(stdwebhook.HeaderID, r.WebhookID)
	ts := now.Unix()
	req.Header.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	if len(w.keys) > 0 {
		req.Header.Set(stdwebhook.HeaderSignature, stdwebhook.Sign(w.keys, r.WebhookID, ts, r.Body))
	}
	return req, nil
}

// addSignedWebhook registers the kill or alerts destination when its
// endpoint is set, with the signing keys parsed from its secrets and its
// secrets file (read again here: it may have been rotated since validation).
func (s *alertSink) addSignedWebhook(ctx context.Context, host component.Host, name string, dc *DestinationConfig) error {
	if dc.Endpoint == "" {
		return nil
	}
	keys, err := dc.signingKeys(name)
	if err != nil {
		return err
	}
	w := &signedWebhook{endpoint: dc.Endpoint, keys: keys}
	return s.addReceiver(ctx, host, name, dc.Endpoint, &dc.ClientConfig, w, w.keys)
}
