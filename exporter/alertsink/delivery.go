package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"context"
	"errors"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// Delivery, shared by every destination: one attempt per queued record,
// its outcome counted, retries (with Retry-After) left to the exporter's
// queue, a signed 410 Gone switching a destination off.

// userAgent is sent with every webhook.
const userAgent = "otelcol-loop-alertsink/1"

// maxResponseBody bounds how much of a reply is read (and discarded).
const maxResponseBody = 64 << 10

// Outcome labels of otelcol_alertsink_webhook_requests.
const (
	resultDelivered = "delivered"
	resultRetry     = "retry"
	resultRejected  = "rejected"
	resultDisabled  = "disabled"
)

// goneTolerance is the accepted distance of a signed 410's
// webhook-timestamp from now, the same window receivers apply to requests.
const goneTolerance = 5 * time.Minute

// deliverAll sends every record once. It returns the records that should be
// retried and an error describing why (nil when none); delivered, rejected,
// expired and disabled records are done. When a receiver asked for a delay
// (Retry-After), the error carries the longest one.
func (s *alertSink) deliverAll(ctx context.Context, recs []alert.Record) ([]alert.Record, error) {
	var failed []alert.Record
	var errs []error
	var wait time.Duration
	for i := range recs {
		err := s.deliver(ctx, &recs[i])
		if err == nil {
			continue
		}
		failed = append(failed, recs[i])
		errs = append(errs, err)
		var re *retryableError
		if errors.As(err, &re) && re.after > wait {
			wait = re.after
		}
	}
	if len(errs) == 0 {
		return nil, nil
	}
	err := errors.Join(errs...)
	if wait > 0 {
		err = exporterhelper.NewThrottleRetry(err, wait)
	}
	return failed, err
}

// retryableError is a delivery failure worth another attempt. Its text names
// the destination, the endpoint it tried (without credentials or query), the
// webhook-id and the outcome, never a secret: "connection_error" alone does
// not tell a user that the supervisor listens on another port.
type retryableError struct {
	dest, url, id, code string
	after               time.Duration
}

func (e *retryableError) Error() string {
	msg := "alert_sink: " + e.dest + " webhook " + e.id + " to " + e.url + ": " + e.code
	if e.code == "connection_error" && e.dest == alert.DestKill {
		msg += " (is the supervisor listening there? loopsupervisor --listen must match kill.endpoint)"
	}
	if e.after > 0 {
		msg += " (retry after " + e.after.String() + ")"
	}
	return msg
}

// endpointForLogs is endpoint with what may be secret removed: user info,
// query and fragment. An unparsable endpoint (start validates them) is
// shown as a placeholder rather than quoted.
func endpointForLogs(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "<unparsable endpoint>"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func (s *alertSink) count(ctx context.Context, dest, code, result string) {
	s.telemetry.AlertsinkWebhookRequests.Add(ctx, 1, metric.WithAttributes(
		attribute.String("destination", dest), attribute.String("code", code), attribute.String("result", result)))
}

func (s *alertSink) dropped(ctx context.Context, dest, reason string) {
	s.telemetry.AlertsinkRecordsDropped.Add(ctx, 1, metric.WithAttributes(
		attribute.String("destination", dest), attribute.String("reason", reason)))
}

// deliver makes one attempt for one record. nil means the record is done
// with (delivered or dropped for good); a *retryableError means try again.
func (s *alertSink) deliver(ctx context.Context, r *alert.Record) error {
	d := s.dests[r.Dest]
	if d == nil {
		// Queued under a configuration that had this destination.
		s.dropped(ctx, r.Dest, "disabled")
		s.logger.Warn("alert_sink: destination no longer configured; record dropped",
			zap.String("destination", r.Dest), zap.String("webhook_id", r.WebhookID))
		return nil
	}
	if d.disabled.Load() {
		s.dropped(ctx, r.Dest, "disabled")
		return nil
	}
	now := s.now()
	if r.Expired(now) {
		if r.Type == webhookbody.TypeKill {
			s.expired(ctx, r.EventID)
		} else {
			s.dropped(ctx, r.Dest, "expired")
		}
		return nil
	}
	req, err := d.dest.newRequest(ctx, r, now)
	if err != nil {
		// Validated at start; cannot happen short of memory corruption.
		s.dropped(ctx, r.Dest, "rejected")
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := d.client.Do(req)
	if err != nil {
		code := classifyTransportError(ctx, err)
		s.count(ctx, r.Dest, code, resultRetry)
		return &retryableError{dest: r.Dest, url: d.shown, id: r.WebhookID, code: code}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	_ = resp.Body.Close()
	code := strconv.Itoa(resp.StatusCode)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		s.count(ctx, r.Dest, code, resultDelivered)
		s.logger.Debug("alert_sink: webhook delivered", zap.String("destination", r.Dest),
			zap.String("webhook_id", r.WebhookID), zap.Int("status", resp.StatusCode))
		return nil
	case resp.StatusCode == http.StatusGone && !stdwebhook.VerifyGone(d.goneKeys, r.WebhookID, resp.Header, now, goneTolerance):
		// Anyone who binds the port for a moment could answer 410: without
		// the destination's signature it is a failed delivery, retried.
		s.count(ctx, r.Dest, code, resultRetry)
		s.logger.Warn("alert_sink: receiver answered 410 Gone without a valid signature; not disabling the destination, retrying",
			zap.String("destination", r.Dest), zap.String("endpoint", d.shown), zap.String("webhook_id", r.WebhookID))
		return &retryableError{dest: r.Dest, url: d.shown, id: r.WebhookID, code: "HTTP 410 (unsigned)"}
	case resp.StatusCode == http.StatusGone:
		s.count(ctx, r.Dest, code, resultDisabled)
		s.dropped(ctx, r.Dest, "disabled")
		if d.disabled.CompareAndSwap(false, true) {
			s.telemetry.AlertsinkEndpointsDisabled.Add(ctx, 1, metric.WithAttributes(attribute.String("destination", r.Dest)))
			s.logger.Error("alert_sink: receiver answered a signed 410 Gone; destination disabled until restart, its records are dropped",
				zap.String("destination", r.Dest), zap.String("endpoint", d.shown), zap.String("webhook_id", r.WebhookID))
		}
		return nil
	case retryableStatus(resp.StatusCode):
		after := retryAfter(resp.Header.Get("Retry-After"), now)
		s.count(ctx, r.Dest, code, resultRetry)
		return &retryableError{dest: r.Dest, url: d.shown, id: r.WebhookID, code: "HTTP " + code, after: after}
	default:
		s.count(ctx, r.Dest, code, resultRejected)
		s.dropped(ctx, r.Dest, "rejected")
		s.logger.Error("alert_sink: receiver rejected webhook; not retried",
			zap.String("destination", r.Dest), zap.String("endpoint", d.shown), zap.String("webhook_id", r.WebhookID),
			zap.String("type", r.Type), zap.Int("status", resp.StatusCode))
		return nil
	}
}

// retryableStatus reports the statuses worth another attempt.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500 && code <= 599
}

// maxRetryAfter bounds a receiver's Retry-After; exporterhelper's
// max_elapsed_time still applies on top.
const maxRetryAfter = time.Hour

// retryAfter parses a Retry-After value: delay-seconds or an HTTP-date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d < 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// classifyTransportError names a failed round trip without quoting the URL.
func classifyTransportError(ctx context.Context, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return "timeout"
	}
	return "connection_error"
}
