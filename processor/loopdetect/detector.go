package loopdetect

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// detector is one loop_detect processor: the engine and what its traces
// and logs components share (factory.go). It keeps engine state (digests
// per session), never pdata: batches are forwarded as they came, with a
// transition event added where a session's state changed. The walk over a
// batch is core.go; traces.go and logs.go adapt the two signals to it.
type detector struct {
	cfg    *Config
	logger *zap.Logger
	eng    *engine.Engine
	x      *extract.Extractor
	pre    *pdataspan.Prefilter // skips non-tool spans in one pass over their attributes
	// traces and logs are the two signals' sides: adapter, outputs, batches
	// in flight.
	traces *tracesSide
	logs   *logsSide
	// traceSessions: no session keys are configured, the session is the
	// trace id (usage.go skips the model spans of untracked traces).
	traceSessions bool
	telemetry     *metadata.TelemetryBuilder

	// eventNow is the event clock (unix ns) in event_time mode.
	eventNow atomic.Int64
	lastTick atomic.Int64
	// reported mirrors engine stats already turned into metrics.
	reportMu sync.Mutex
	reported struct{ sessions, evictedStale, evictedActive, expired, dups, ooo, leases int64 }

	pendingMu sync.Mutex
	pending   []engine.Transition

	// members counts the components sharing the detector and started
	// those started (both guarded by the factory's lock).
	members, started int

	stop chan struct{}
	done chan struct{}
	pool sync.Pool
}

func newDetector(set processor.Settings, cfg *Config) (*detector, error) {
	eng, err := engine.New(cfg.engineConfig())
	if err != nil {
		return nil, fmt.Errorf("loop_detect: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("loop_detect: telemetry: %w", err)
	}
	d := &detector{
		cfg:       cfg,
		logger:    set.Logger,
		eng:       eng,
		x:         extract.New(cfg.keys(), canon.NewNormalizer(cfg.Normalizer)),
		telemetry: tb,
	}
	d.pre = pdataspan.NewPrefilter(d.x.Keys())
	d.traceSessions = len(d.x.Keys().Session) == 0
	d.traces = newSide(d, signal[ptrace.Traces, ptrace.SpanSlice](tracesSignal{d: d}))
	d.logs = newSide(d, signal[plog.Logs, plog.LogRecordSlice](logsSignal{x: newLogsExtractor(cfg)}))
	d.pool.New = func() any { return new(batchState) }
	return d, nil
}

// batchState is reused across batches so the hot path allocates little.
type batchState struct {
	call  engine.ToolCall
	sc    extract.Scratch
	trans []engine.Transition
	// batch collects the batch's transitions, to re-emit them should
	// forwarding fail (the engine has already counted them).
	batch []engine.Transition
	// trace: usage.go.
	trace traceMemo
	// clock is the batch's processing time (batchNow), when clockOK.
	clock   time.Time
	clockOK bool
	// walk is the batch's pass (core.go).
	walk walk
}

// batchNow is the time the engine decides st's batch at: the event clock in
// event_time mode, else the wall clock read at the batch's first tool or
// model call that needs it. One reading per batch, not per span: the clock
// was a fiftieth of a tool span's cost, and a batch is handled at once.
func (d *detector) batchNow(st *batchState) time.Time {
	if d.cfg.EventTime {
		return d.now()
	}
	if !st.clockOK {
		st.clock, st.clockOK = time.Now(), true
	}
	return st.clock
}

// release returns st to the pool. The call's strings point into the batch
// just forwarded: they are dropped before reuse, so no pdata outlives
// forwarding, and the batch's memos and clock are forgotten.
func (d *detector) release(st *batchState) {
	st.call = engine.ToolCall{}
	st.batch = st.batch[:0]
	st.trace = traceMemo{}
	st.clockOK = false
	st.walk = walk{pending: st.walk.pending[:0]}
	st.sc.ForgetResource()
	d.pool.Put(st)
}

// start starts the wall-clock sweeper (with the first component started).
func (d *detector) start() {
	if d.cfg.EventTime {
		return
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.sweep()
}

// shutdown stops the sweeper (with the last component shut down); in
// event_time mode, the end of recorded input, the timers fire at the last
// event time.
func (d *detector) shutdown(ctx context.Context) error {
	if d.stop != nil {
		close(d.stop)
		<-d.done
		d.stop = nil
	}
	var err error
	if d.cfg.EventTime {
		// End of recorded input: let timers fire at the last event time.
		if now := d.eventNow.Load(); now > 0 {
			err = d.tick(ctx, time.Unix(0, now))
		}
	}
	d.telemetry.Shutdown()
	return err
}

func (d *detector) sweep() {
	defer close(d.done)
	t := time.NewTicker(d.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case now := <-t.C:
			if err := d.tick(context.Background(), now); err != nil {
				d.logger.Warn("Forwarding timer-driven transitions failed", zap.Error(err))
			}
		}
	}
}

func (d *detector) now() time.Time {
	if d.cfg.EventTime {
		return time.Unix(0, d.eventNow.Load())
	}
	return time.Now()
}

// batchCounts are one batch's counters, added to the metrics once.
type batchCounts struct {
	items, calls, malformed, oversized, badEvidence, foreign, noSession int64
	// refused counts calls the agent refused to run (logs input).
	refused int64
}

// noSessionKey says whether c has neither a session attribute nor a trace
// id: grouping every such call into the one all-zero session would merge
// different agents into one "loop" (and kill the last sender).
func noSessionKey(c *engine.ToolCall) bool {
	return c.SessionSource == "trace_id" && c.TraceID == ([16]byte{})
}

// observe feeds the extracted call to the engine: its transitions are left
// in st.trans (recorded, and kept in st.batch for re-emission).
func (d *detector) observe(ctx context.Context, st *batchState, out extract.Outcome, n *batchCounts) {
	n.calls++
	n.malformed += b2i(out.Malformed)
	n.oversized += b2i(out.Oversized)
	n.badEvidence += b2i(out.BadEvidence)
	if d.cfg.observer != nil {
		d.observeWithHook(st)
	} else {
		st.trans = d.eng.Observe(&st.call, d.batchNow(st), st.trans[:0])
	}
	for t := range st.trans {
		d.record(ctx, &st.trans[t])
	}
	st.batch = append(st.batch, st.trans...)
}

func (d *detector) countBatch(ctx context.Context, c batchCounts) {
	d.telemetry.LoopdetectSpans.Add(ctx, c.items)
	if c.calls > 0 {
		d.telemetry.LoopdetectToolCalls.Add(ctx, c.calls)
		d.addDegraded(ctx, "malformed", c.malformed)
		d.addDegraded(ctx, "oversized", c.oversized)
		d.addDegraded(ctx, "bad_evidence", c.badEvidence)
	}
	d.addDegraded(ctx, "foreign_verdict", c.foreign)
	d.addDegraded(ctx, "no_session", c.noSession)
	if c.refused > 0 {
		d.telemetry.LoopdetectRefusedCalls.Add(ctx, c.refused)
	}
}

// eventTimeTick runs the timers when the event clock has moved a tick
// since the last run (event_time mode; the sweeper does it otherwise).
func (d *detector) eventTimeTick(ctx context.Context) error {
	if !d.cfg.EventTime {
		return nil
	}
	now := d.eventNow.Load()
	if last := d.lastTick.Load(); now-last >= int64(d.cfg.TickInterval) && d.lastTick.CompareAndSwap(last, now) {
		return d.tick(ctx, time.Unix(0, now))
	}
	return nil
}

func advance(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (d *detector) addDegraded(ctx context.Context, kind string, n int64) {
	if n > 0 {
		d.telemetry.LoopdetectDegraded.Add(ctx, n, metric.WithAttributes(attribute.String("kind", kind)))
	}
}

// reportStats turns the engine's counters into metric deltas.
func (d *detector) reportStats(ctx context.Context) {
	s := d.eng.Stats()
	d.reportMu.Lock()
	defer d.reportMu.Unlock()
	r := &d.reported
	delta := func(cur int64, last *int64) int64 { v := cur - *last; *last = cur; return v }
	if v := delta(s.Sessions.Load(), &r.sessions); v != 0 {
		d.telemetry.LoopdetectSessions.Add(ctx, v)
	}
	// Capacity evictions say whether the session was stale or still
	// calling (a flood's own sessions, or max_sessions too low).
	if v := delta(s.EvictedStale.Load(), &r.evictedStale); v != 0 {
		d.telemetry.LoopdetectEvictions.Add(ctx, v, metric.WithAttributes(attribute.String("cause", "capacity"), attribute.String("session", "stale")))
	}
	if v := delta(s.EvictedActive.Load(), &r.evictedActive); v != 0 {
		d.telemetry.LoopdetectEvictions.Add(ctx, v, metric.WithAttributes(attribute.String("cause", "capacity"), attribute.String("session", "active")))
	}
	if v := delta(s.Expired.Load(), &r.expired); v != 0 {
		d.telemetry.LoopdetectEvictions.Add(ctx, v, metric.WithAttributes(attribute.String("cause", "idle")))
	}
	if v := delta(s.Duplicates.Load(), &r.dups); v != 0 {
		d.telemetry.LoopdetectDegraded.Add(ctx, v, metric.WithAttributes(attribute.String("kind", "duplicate")))
	}
	if v := delta(s.OutOfOrder.Load(), &r.ooo); v != 0 {
		d.telemetry.LoopdetectDegraded.Add(ctx, v, metric.WithAttributes(attribute.String("kind", "out_of_order")))
	}
	if v := delta(s.LeasesRejected.Load(), &r.leases); v != 0 {
		d.telemetry.LoopdetectDegraded.Add(ctx, v, metric.WithAttributes(attribute.String("kind", "lease_rejected")))
	}
}

// record counts a transition and logs the ones an operator must see.
func (d *detector) record(ctx context.Context, t *engine.Transition) {
	d.telemetry.LoopdetectTransitions.Add(ctx, 1, metric.WithAttributes(
		attribute.String("state", t.To.String()), attribute.String("reason", t.Reason.String())))
	if t.Kill || t.DryRun {
		d.telemetry.LoopdetectKills.Add(ctx, 1, metric.WithAttributes(attribute.Bool("dry_run", t.DryRun)))
	}
	if t.To == engine.StateStuck && t.From != engine.StateStuck {
		d.telemetry.LoopdetectDetectionDelay.Record(ctx, t.DelaySeconds)
	}
	d.recordLoopTokens(ctx, t)
	if t.To == engine.StateStuck {
		d.loggerFor(t).Info("Agent session stuck",
			zap.String("session", t.Session), zap.String("reason", t.Reason.String()),
			zap.Int64("call_index", t.CallIndex), zap.Bool("kill", t.Kill), zap.Bool("dry_run", t.DryRun),
			zap.String("explanation", t.Explanation))
		return
	}
	d.loggerFor(t).Debug("Agent session transition", zap.String("session", t.Session),
		zap.Stringer("from", t.From), zap.Stringer("to", t.To), zap.Stringer("reason", t.Reason))
}

// maxPending bounds the transitions kept for re-emission.
const maxPending = 4096

// keepPending keeps transitions whose batch could not be forwarded: the
// engine will not decide them again (a retried batch is a duplicate), so
// the next tick re-emits them as synthetic spans — a kill is never lost to
// a full queue downstream. Their event ids are stable, so a receiver that
// saw them once recognises the repetition.
func (d *detector) keepPending(trans []engine.Transition) {
	if len(trans) == 0 {
		return
	}
	d.pendingMu.Lock()
	defer d.pendingMu.Unlock()
	d.pending = append(d.pending, trans...)
	if over := len(d.pending) - maxPending; over > 0 {
		d.pending = append(d.pending[:0], d.pending[over:]...)
		d.logger.Warn("Dropped transitions that could not be forwarded", zap.Int("dropped", over))
	}
}

func (d *detector) takePending() []engine.Transition {
	d.pendingMu.Lock()
	defer d.pendingMu.Unlock()
	p := d.pending
	d.pending = nil
	return p
}

// tick runs the engine's timers and sends their transitions, with the
// pending ones, at once to the pipelines' outputs (core.go's deliver).

func (d *detector) tick(ctx context.Context, now time.Time) error {
	fresh := d.eng.Tick(now, nil)
	d.reportStats(ctx)
	for i := range fresh {
		d.record(ctx, &fresh[i])
	}
	trans := append(d.takePending(), fresh...)
	if len(trans) == 0 {
		return nil
	}
	var toLogs, toTraces []engine.Transition
	for i := range trans {
		if d.routeToLogs(&trans[i]) {
			toLogs = append(toLogs, trans[i])
		} else {
			toTraces = append(toTraces, trans[i])
		}
	}
	return errors.Join(d.logs.deliver(ctx, toLogs), d.traces.deliver(ctx, toTraces))
}

// routeToLogs says whether a timer-driven transition goes to the logs
// pipelines' outputs: a session without trace context came from the logs
// input (the engine does not record a session's signal); with pipelines of
// one signal only, everything goes to them.
func (d *detector) routeToLogs(t *engine.Transition) bool {
	return d.logs.hasOutputs() && (!d.traces.hasOutputs() || t.TraceID == [16]byte{})
}

// loggerFor is the logger of the pipeline a transition goes to, so a log
// line names the signal that caused it.
func (d *detector) loggerFor(t *engine.Transition) *zap.Logger {
	var l *zap.Logger
	if d.routeToLogs(t) {
		l = d.logs.firstLogger()
	} else {
		l = d.traces.firstLogger()
	}
	if l == nil {
		return d.logger
	}
	return l
}

// putTarget writes the agent's identity as resource attributes of a
// transition the processor emits itself, so it routes like the agent's data.
func putTarget(m pcommon.Map, t target.Process) {
	for _, kv := range [...][2]string{{"service.name", t.ServiceName}, {"service.instance.id", t.ServiceInstanceID}, {"host.name", t.HostName}} {
		if kv[1] != "" {
			m.PutStr(kv[0], kv[1])
		}
	}
	if t.PID != 0 {
		m.PutInt("process.pid", t.PID)
	}
}

// syntheticSpanID derives the span id from the event id, so a replay
// produces the same span.
func syntheticSpanID(id string) pcommon.SpanID {
	var s pcommon.SpanID
	h := xxhash.Sum64String(id) | 1
	for i := range s {
		s[i] = byte(h >> (8 * i))
	}
	return s
}

func hexID(b []byte) string {
	for _, c := range b {
		if c != 0 {
			return hex.EncodeToString(b)
		}
	}
	return ""
}

func toEvent(t *engine.Transition) loopevent.Event {
	conf := "high"
	if t.LowConfidence {
		conf = "low"
	}
	return loopevent.Event{
		ID:                 t.ID,
		Sequence:           t.Seq,
		Session:            t.Session,
		SessionSource:      t.SessionSource,
		TraceID:            hexID(t.TraceID[:]),
		From:               t.From.String(),
		To:                 t.To.String(),
		Reason:             t.Reason.String(),
		Trigger:            t.Trigger.String(),
		Period:             int64(t.Period),
		Repetitions:        int64(t.Repetitions),
		Window:             int64(t.Window),
		CallIndex:          t.CallIndex,
		CycleTools:         t.CycleTools,
		Signatures:         t.Signatures,
		Fingerprint:        t.Fingerprint,
		FingerprintSource:  t.FingerprintSource.String(),
		Confidence:         conf,
		NormalizerVersion:  canon.NormalizerVersion,
		FingerprintVersion: engine.FingerprintVersion,
		FirstLoopSpanID:    hexID(t.FirstLoopSpanID[:]),
		SpanID:             hexID(t.TriggerSpanID[:]),
		DelayCalls:         t.DelayCalls,
		DelaySeconds:       t.DelaySeconds,
		Kill:               t.Kill,
		DryRun:             t.DryRun,
		Explanation:        t.Explanation,
		DecidedAt:          t.DecidedAt,
		Client:             t.Client,
		Agent:              t.Agent,
		Target:             t.Target,
		TokensTotal:        t.TokensTotal,
		TokensLoop:         t.TokensLoop,
	}
}
