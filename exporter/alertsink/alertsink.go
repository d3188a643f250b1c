package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"
	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadata"
)

// This file holds the exporter itself: events become records before the
// queue (toRecords), queued records go to delivery (delivery.go). Each
// destination kind has its own file: webhook.go (kill, alerts),
// alertmanager.go; destination.go is what they share.

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
	// sightings are the agent instances announced with loop.seen.
	sightings *alert.Sightings
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
		sightings: alert.NewSightings(maxSightings),
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

// maxSightings bounds the agent instances remembered as announced; one
// machine's agents, or a tier of them, fit many times over.
const maxSightings = 4096

// seen appends the loop.seen record of a resource whose agent instance is
// new to this run.
func (s *alertSink) seen(ctx context.Context, recs []alert.Record, res pcommon.Map) []alert.Record {
	r, ok, err := s.policy.SeenRecord(s.sightings, res, s.now())
	if err != nil {
		s.telemetry.AlertsinkEventsInvalid.Add(ctx, 1, metric.WithAttributes(attribute.String("signal", "seen")))
		return recs
	}
	if ok {
		recs = append(recs, r)
	}
	return recs
}

// firstKey is the first signing key of a destination (nil when it has
// none): the key its bodies' instance digests are made with.
func (s *alertSink) firstKey(name string) []byte {
	if d, ok := s.dests[name]; ok && len(d.goneKeys) > 0 {
		return d.goneKeys[0]
	}
	return nil
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
	if err := s.addSignedWebhook(ctx, host, alert.DestKill, &s.cfg.Kill.DestinationConfig); err != nil {
		return err
	}
	if err := s.addSignedWebhook(ctx, host, alert.DestAlerts, &s.cfg.Alerts.DestinationConfig); err != nil {
		return err
	}
	s.policy.KillKey, s.policy.AlertsKey = s.firstKey(alert.DestKill), s.firstKey(alert.DestAlerts)
	if s.cfg.Kill.OnlyNamedAgents {
		u, err := url.Parse(s.cfg.Kill.Endpoint)
		if err != nil {
			return fmt.Errorf("kill.endpoint: %w", err)
		}
		s.policy.KillListen = u.Host
	}
	if am := &s.cfg.Alertmanager; am.Endpoint != "" {
		api, err := newAlertmanagerAPI(am.Endpoint)
		if err != nil {
			return fmt.Errorf("alertmanager.endpoint: %w", err)
		}
		if err := s.addReceiver(ctx, host, alert.DestAlertmanager, am.Endpoint, &am.ClientConfig, api, nil); err != nil {
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
		rs, out, err := s.policy.Records(ev, x.Routes[i], now)
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

// tracesExporter converts incoming traces into a compact carrier of alert
// records before handing them to the exporterhelper queue.
type tracesExporter struct {
	exporter.Traces
	sink *alertSink
}

func (e *tracesExporter) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	recs := e.sink.toRecords(ctx, alert.ExtractTraces(td), "traces")
	for i, rss := 0, td.ResourceSpans(); i < rss.Len(); i++ {
		recs = e.sink.seen(ctx, recs, rss.At(i).Resource().Attributes())
	}
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
	for i, rls := 0, ld.ResourceLogs(); i < rls.Len(); i++ {
		recs = e.sink.seen(ctx, recs, rls.At(i).Resource().Attributes())
	}
	if len(recs) == 0 {
		return nil
	}
	return e.Logs.ConsumeLogs(ctx, alert.LogsCarrier(recs))
}
