package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

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

// goneTolerance is the accepted distance of a signed 410's
// webhook-timestamp from now, the same window receivers apply to requests.
const goneTolerance = 5 * time.Minute

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

// alertmanagerAPI posts a record's alerts to Alertmanager's v2 API.
// Alertmanager merges alerts by label set, so a re-sent record changes
// nothing.
type alertmanagerAPI struct {
	url string
}

// alertsPath is the Alertmanager v2 API path alerts are posted to.
const alertsPath = "/api/v2/alerts"

func newAlertmanagerAPI(endpoint string) (*alertmanagerAPI, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), alertsPath) {
		u = u.JoinPath(alertsPath)
	}
	return &alertmanagerAPI{url: u.String()}, nil
}

func (a *alertmanagerAPI) newRequest(ctx context.Context, r *alert.Record, _ time.Time) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(r.Body))
}

// alertSink holds what the traces and logs exporters share: the policy that
// turns events into records, and the destinations that records go to.
type alertSink struct {
	cfg       *Config
	set       component.TelemetrySettings
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	policy    alert.Policy
	dests     map[string]*receiver
	now       func() time.Time
	// enqueue hands records to the exporter's queue; set by the factory.
	enqueue func(context.Context, []alert.Record) error
	// stopDue stops the loop that fires delayed Alertmanager alerts.
	stopDue chan struct{}
	dueDone chan struct{}
}

func newAlertSink(cfg *Config, set exporter.Settings) (*alertSink, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	s := &alertSink{
		cfg:       cfg,
		set:       set.TelemetrySettings,
		logger:    set.Logger,
		telemetry: tb,
		dests:     map[string]*receiver{},
		now:       time.Now,
		policy: alert.Policy{
			Kill:    cfg.Kill.Endpoint != "",
			KillTTL: cfg.Kill.TTL,
			WarnOn:  toSet(cfg.Kill.WarnOn),
			Alerts:  cfg.Alerts.Endpoint != "",
			States:  toSet(cfg.Alerts.States),
			Reasons: toSet(cfg.Alerts.Reasons),

			AlertsInstanceID: cfg.Alerts.IncludeInstanceID,
		},
	}
	if cfg.Alertmanager.Endpoint != "" {
		am := cfg.Alertmanager
		s.policy.Alertmanager = &alert.Alertmanager{
			States:         toSet(am.States),
			UncertainAfter: am.UncertainAfter,
			ResolveAfter:   am.ResolveAfter,
			TraceURL:       am.TraceURL,
			Labels:         am.Labels,
		}
	}
	if s.policy.KillTTL <= 0 {
		s.policy.KillTTL = 60 * time.Second
	}
	return s, nil
}

func toSet(xs []string) map[string]bool {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func (s *alertSink) start(ctx context.Context, host component.Host) error {
	add := func(name, endpoint string, hc *confighttp.ClientConfig, dest destination, keys [][]byte) error {
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
	addWebhook := func(name string, dc *DestinationConfig) error {
		if dc.Endpoint == "" {
			return nil
		}
		w := &signedWebhook{endpoint: dc.Endpoint}
		for i, sec := range dc.Secrets {
			k, err := stdwebhook.ParseSecret(string(sec))
			if err != nil {
				return fmt.Errorf("%s.secrets[%d]: %w", name, i, err)
			}
			w.keys = append(w.keys, k)
		}
		return add(name, dc.Endpoint, &dc.ClientConfig, w, w.keys)
	}
	if err := addWebhook(alert.DestKill, &s.cfg.Kill.DestinationConfig); err != nil {
		return err
	}
	if err := addWebhook(alert.DestAlerts, &s.cfg.Alerts.DestinationConfig); err != nil {
		return err
	}
	if am := &s.cfg.Alertmanager; am.Endpoint != "" {
		api, err := newAlertmanagerAPI(am.Endpoint)
		if err != nil {
			return fmt.Errorf("alertmanager.endpoint: %w", err)
		}
		if err := add(alert.DestAlertmanager, am.Endpoint, &am.ClientConfig, api, nil); err != nil {
			return err
		}
		if am.UncertainAfter > 0 && s.policy.Alertmanager.States["uncertain"] {
			s.startDueLoop(min(am.UncertainAfter/4, 10*time.Second))
		}
	}
	if s.cfg.Kill.Endpoint == "" {
		s.logger.Warn("alert_sink: kill.endpoint is not set; kill requests are not delivered to any supervisor")
	}
	return nil
}

// startDueLoop fires delayed Alertmanager alerts (a session still
// uncertain after alertmanager.uncertain_after) every interval.
func (s *alertSink) startDueLoop(interval time.Duration) {
	s.stopDue = make(chan struct{})
	s.dueDone = make(chan struct{})
	go func() {
		defer close(s.dueDone)
		t := time.NewTicker(max(interval, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-s.stopDue:
				return
			case <-t.C:
				s.fireDue(context.Background())
			}
		}
	}()
}

// fireDue queues the delayed Alertmanager alerts whose time has come.
func (s *alertSink) fireDue(ctx context.Context) {
	if s.policy.Alertmanager == nil || s.enqueue == nil {
		return
	}
	due := s.policy.Alertmanager.Due(s.now())
	if len(due) == 0 {
		return
	}
	recs := make([]alert.Record, 0, len(due))
	for id, als := range due {
		r, err := alert.AlertmanagerRecord(id, "."+alert.DestAlertmanager+".due", als)
		if err != nil {
			s.logger.Error("alert_sink: rendering delayed alertmanager alert", zap.Error(err))
			continue
		}
		recs = append(recs, r)
	}
	if err := s.enqueue(ctx, recs); err != nil {
		s.logger.Warn("alert_sink: queueing delayed alertmanager alerts failed", zap.Error(err))
	}
}

func (s *alertSink) shutdown(context.Context) error {
	if s.stopDue != nil {
		close(s.stopDue)
		<-s.dueDone
		s.stopDue = nil
	}
	for _, d := range s.dests {
		if d.client != nil {
			d.client.CloseIdleConnections()
		}
	}
	if s.telemetry != nil {
		s.telemetry.Shutdown()
	}
	return nil
}

// toRecords converts extracted events into records, counting what does not
// become a record. It runs before the queue.
func (s *alertSink) toRecords(ctx context.Context, x alert.Extracted, signal string) []alert.Record {
	if x.Invalid > 0 {
		s.telemetry.AlertsinkEventsInvalid.Add(ctx, int64(x.Invalid), metric.WithAttributes(attribute.String("signal", signal)))
		s.logger.Debug("alert_sink: dropped undecodable transition events", zap.Int("count", x.Invalid), zap.String("signal", signal))
	}
	var recs []alert.Record
	now := s.now()
	for i := range x.Events {
		ev := &x.Events[i]
		rs, out, err := s.policy.Records(ev, now)
		if err != nil {
			s.telemetry.AlertsinkEventsInvalid.Add(ctx, 1, metric.WithAttributes(attribute.String("signal", signal)))
			s.logger.Debug("alert_sink: dropped transition event", zap.Error(err))
			continue
		}
		if out.Filtered {
			s.telemetry.AlertsinkEventsFiltered.Add(ctx, 1)
		}
		if out.Expired {
			s.expired(ctx, ev.ID)
		}
		recs = append(recs, rs...)
	}
	return recs
}

func (s *alertSink) expired(ctx context.Context, eventID string) {
	s.telemetry.AlertsinkKillsExpired.Add(ctx, 1)
	s.telemetry.AlertsinkRecordsDropped.Add(ctx, 1, metric.WithAttributes(
		attribute.String("destination", alert.DestKill), attribute.String("reason", "expired")))
	s.logger.Warn("alert_sink: kill request expired before delivery; dropped", zap.String("event_id", eventID))
}

// appendQueued decodes one queued record, skipping what is not one.
func (s *alertSink) appendQueued(recs []alert.Record, m pcommon.Map) []alert.Record {
	r, err := alert.FromMap(m)
	if err != nil {
		s.logger.Debug("alert_sink: skipping queued item", zap.Error(err))
		return recs
	}
	return append(recs, r)
}

// pushTraces delivers the records of a traces carrier (the queue's items).
func (s *alertSink) pushTraces(ctx context.Context, td ptrace.Traces) error {
	var recs []alert.Record
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				recs = s.appendQueued(recs, spans.At(k).Attributes())
			}
		}
	}
	failed, err := s.deliverAll(ctx, recs)
	if err != nil {
		return consumererror.NewTraces(err, alert.TracesCarrier(failed))
	}
	return nil
}

// pushLogs delivers the records of a logs carrier (the queue's items).
func (s *alertSink) pushLogs(ctx context.Context, ld plog.Logs) error {
	var recs []alert.Record
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				recs = s.appendQueued(recs, lrs.At(k).Attributes())
			}
		}
	}
	failed, err := s.deliverAll(ctx, recs)
	if err != nil {
		return consumererror.NewLogs(err, alert.LogsCarrier(failed))
	}
	return nil
}

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
		if r.Type == alert.TypeKill {
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

// tracesExporter converts incoming traces into a compact carrier of alert
// records before handing them to the exporterhelper queue.
type tracesExporter struct {
	exporter.Traces
	sink *alertSink
}

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	recs := e.sink.toRecords(ctx, alert.ExtractTraces(td), "traces")
	if len(recs) == 0 {
		return nil
	}
	return e.Traces.ConsumeTraces(ctx, alert.TracesCarrier(recs))
}

// logsExporter is the logs counterpart of tracesExporter.
type logsExporter struct {
	exporter.Logs
	sink *alertSink
}

func (e *logsExporter) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	recs := e.sink.toRecords(ctx, alert.ExtractLogs(ld), "logs")
	if len(recs) == 0 {
		return nil
	}
	return e.Logs.ConsumeLogs(ctx, alert.LogsCarrier(recs))
}
