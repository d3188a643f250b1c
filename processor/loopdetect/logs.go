package loopdetect

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// The logs input: agents that report tool calls as log events (Claude
// Code's claude_code.tool_result records) feed the same engine as tool
// spans. Transition events are appended as log records (event name
// loopdetect.transition, the loopevent attribute schema) to the scope that
// carried the triggering record, so alert_sink's logs input delivers them.
// defaultLogSessionKeys are used for log records when session.keys is not
// configured: log events usually carry no trace context, and a trace id of
// zero would put every agent into one session.
var defaultLogSessionKeys = []string{"session.id", "gen_ai.conversation.id"}

// claudeToolDecision is Claude Code's record of whether a tool call may
// run. A rejected call (by a PreToolUse hook such as loopsupervisor's, by
// the user or by a rule) never runs and leaves no tool_result, but the
// model asked for it: a model that keeps asking for the call its hook
// blocks is still in its loop, and only these records show it. Accepted
// decisions are followed by the call's tool_result and are skipped.
const claudeToolDecision = "claude_code.tool_decision"

// rejectedCall reports whether a tool_decision record is a rejection; any
// other record passes.
func rejectedCall(rec *logRecord) bool {
	if rec.name != claudeToolDecision {
		return true
	}
	v, ok := rec.lr.Attributes().Get("decision")
	return ok && v.Str() == "reject"
}

// logRecord adapts a log record and its resource to extract.Span. It is a
// value type, so extract.Extract is instantiated for it without boxing.
type logRecord struct {
	lr   plog.LogRecord
	res  pcommon.Map
	name string
}

// eventName is the record's event name: EventName, else a short body
// string (Claude Code puts "claude_code.tool_result" there), else the
// event.name attribute.
func eventName(lr plog.LogRecord) string {
	if n := lr.EventName(); n != "" {
		return n
	}
	if b := lr.Body(); b.Type() == pcommon.ValueTypeStr {
		if s := b.Str(); len(s) <= 128 && s != "" && !strings.ContainsAny(s, " \t\n") {
			return s
		}
	}
	if v, ok := lr.Attributes().Get("event.name"); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func (r logRecord) Name() string { return r.name }

func (r logRecord) Attr(key string) (extract.Value, bool) {
	return pdataspan.Lookup(r.lr.Attributes(), key)
}

func (r logRecord) ResourceAttr(key string) (extract.Value, bool) {
	return pdataspan.Lookup(r.res, key)
}

func (r logRecord) TraceID() [16]byte { return r.lr.TraceID() }

// SpanID is derived from the record's content: log records of one span
// share its span id (or have none), but the engine tells calls apart by
// span id; a redelivered record hashes to the same id and is dropped as a
// duplicate.
func (r logRecord) SpanID() [8]byte {
	var h xxhash.Digest
	h.Reset()
	var b [8]byte
	sid := r.lr.SpanID()
	_, _ = h.Write(sid[:])
	putUint64(&b, uint64(r.time().UnixNano())) // the observed time when Timestamp is unset
	_, _ = h.Write(b[:])
	_, _ = h.WriteString(r.name)
	for _, k := range [...]string{"tool_use_id", "event.sequence", "gen_ai.tool.call.id", "tool_name", "session.id"} {
		if v, ok := r.lr.Attributes().Get(k); ok {
			_, _ = h.WriteString(k)
			_, _ = h.WriteString(v.AsString())
		}
	}
	var id [8]byte
	putUint64(&id, h.Sum64()|1)
	return id
}

func putUint64(b *[8]byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// ParentSpanID is zero: a log record is never nested in another tool call.
func (r logRecord) ParentSpanID() [8]byte { return [8]byte{} }

func (r logRecord) time() time.Time {
	if ts := r.lr.Timestamp(); ts != 0 {
		return ts.AsTime()
	}
	return r.lr.ObservedTimestamp().AsTime()
}

// Start is the record's time less its duration_ms (Claude Code logs a
// tool_result when the call ends), so the record and the span of the same
// call overlap and are merged into one call.
func (r logRecord) Start() time.Time {
	t := r.time()
	if v, ok := r.lr.Attributes().Get("duration_ms"); ok {
		var ms int64
		switch v.Type() {
		case pcommon.ValueTypeInt:
			ms = v.Int()
		case pcommon.ValueTypeDouble:
			ms = int64(v.Double())
		case pcommon.ValueTypeStr:
			ms, _ = strconv.ParseInt(v.Str(), 10, 64)
		}
		if ms > 0 && ms < int64(24*time.Hour/time.Millisecond) {
			return t.Add(-time.Duration(ms) * time.Millisecond)
		}
	}
	return t
}
func (r logRecord) End() time.Time { return r.time() }

// Status: a log record has none; failures come from attributes (Claude
// Code's success = "false"), and a rejected tool_decision is a call that
// failed to run.
func (r logRecord) Status() (bool, string) {
	if r.name != claudeToolDecision {
		return false, ""
	}
	src := "rejected"
	if v, ok := r.lr.Attributes().Get("source"); ok && v.Str() != "" {
		src = "rejected by " + v.Str()
	}
	return true, src
}

func (r logRecord) EventCount() int                             { return 0 }
func (r logRecord) EventName(int) string                        { return "" }
func (r logRecord) EventAttr(int, string) (extract.Value, bool) { return extract.Value{}, false }

// consumeLogs observes the tool calls in ld, appends a log record for every
// transition to the scope of the record that caused it, and forwards ld.
func (d *detector) consumeLogs(ctx context.Context, ld plog.Logs, x *extract.Extractor, next consumer.Logs) error {
	st := d.pool.Get().(*batchState)
	defer d.release(st)
	var n batchCounts
	var noSession int64
	var pending []loopevent.Event
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		res := rl.Resource().Attributes()
		st.sc.ShareResource()
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			pending = pending[:0]
			// Verdicts are this processor's to make: incoming transition
			// records would become signed kills in alert_sink.
			lrs.RemoveIf(func(lr plog.LogRecord) bool {
				if lr.EventName() == loopevent.EventName {
					n.foreign++
					return true
				}
				return false
			})
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				n.items++
				rec := logRecord{lr: lr, res: res, name: eventName(lr)}
				if !rejectedCall(&rec) {
					continue
				}
				if rec.name == claudeToolDecision {
					n.refused++
				}
				if d.cfg.EventTime {
					advance(&d.eventNow, rec.time().UnixNano())
				}
				ok, out := extract.Extract(x, rec, &st.sc, &st.call)
				if !ok {
					continue
				}
				if noSessionKey(&st.call) {
					noSession++
					continue
				}
				d.observe(ctx, st, out, &n)
				for t := range st.trans {
					pending = append(pending, toEvent(&st.trans[t]))
				}
			}
			for p := range pending {
				appendTransition(lrs, &pending[p])
			}
		}
	}
	d.countBatch(ctx, n)
	if noSession > 0 {
		d.addDegraded(ctx, "no_session", noSession)
		d.logger.Debug("Tool-call log records without a session key or trace context were skipped",
			zap.Int64("records", noSession))
	}
	d.reportStats(ctx)
	if err := next.ConsumeLogs(ctx, ld); err != nil {
		d.keepPending(st.batch)
		return err
	}
	return d.eventTimeTick(ctx)
}

// appendTransition writes e as a log record: event name
// loopdetect.transition, the loopevent attributes, the explanation as body.
func appendTransition(lrs plog.LogRecordSlice, e *loopevent.Event) {
	lr := lrs.AppendEmpty()
	lr.SetEventName(loopevent.EventName)
	ts := pcommon.NewTimestampFromTime(e.DecidedAt)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	if e.To == "stuck" {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
		lr.SetSeverityText("WARN")
	} else {
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
	}
	lr.Body().SetStr(e.Explanation)
	e.CopyTo(lr.Attributes())
}

// routeToLogs says whether a timer-driven transition goes out as a log
// record: sessions without trace context came from the logs input.
func (d *detector) routeToLogs(t *engine.Transition) bool {
	return d.nextLogs != nil && (d.next == nil || t.TraceID == [16]byte{})
}

// tickLogs emits timer-driven transitions of log sessions as log records.
func (d *detector) tickLogs(ctx context.Context, trans []engine.Transition) error {
	if len(trans) == 0 {
		return nil
	}
	ld := plog.NewLogs()
	for i := range trans {
		t := &trans[i]
		ev := toEvent(t)
		rl := ld.ResourceLogs().AppendEmpty()
		putTarget(rl.Resource().Attributes(), t.Target)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(metadata.ScopeName)
		appendTransition(sl.LogRecords(), &ev)
		if t.TraceID != ([16]byte{}) {
			lr := sl.LogRecords().At(0)
			lr.SetTraceID(t.TraceID)
		}
	}
	return d.nextLogs.ConsumeLogs(ctx, ld)
}
