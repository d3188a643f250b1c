package pdataspan

import (
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// ClaudeToolDecision is Claude Code's record of whether a tool call may
// run. A rejected call (by a PreToolUse hook such as loopsupervisor's, by
// the user or by a rule) never runs and leaves no tool_result, but the
// model asked for it: a model that keeps asking for the call its hook
// blocks is still in its loop, and only these records show it. Accepted
// decisions are followed by the call's tool_result and are skipped.
const ClaudeToolDecision = "claude_code.tool_decision"

// LogRecord adapts a log record and its resource to extract.Span, as Span
// does a span. It is a value type, so extract.Extract is instantiated for
// it without boxing.
type LogRecord struct {
	LR   plog.LogRecord
	Res  pcommon.Map
	name string
}

// NewLogRecord adapts lr, reading its event name once.
func NewLogRecord(lr plog.LogRecord, res pcommon.Map) LogRecord {
	return LogRecord{LR: lr, Res: res, name: eventName(lr)}
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

// MayBeCall reports whether the record can be a tool call: any record but
// a tool_decision that was not a rejection.
func (r LogRecord) MayBeCall() bool {
	if r.name != ClaudeToolDecision {
		return true
	}
	v, ok := r.LR.Attributes().Get("decision")
	return ok && v.Str() == "reject"
}

// Refused reports whether the record is a tool_decision; of the records
// MayBeCall passes, a rejection.
func (r LogRecord) Refused() bool { return r.name == ClaudeToolDecision }

// Name returns the record's event name.
func (r LogRecord) Name() string { return r.name }

// Attr looks up a record attribute.
func (r LogRecord) Attr(key string) (extract.Value, bool) { return Lookup(r.LR.Attributes(), key) }

// ResourceAttr looks up a resource attribute.
func (r LogRecord) ResourceAttr(key string) (extract.Value, bool) { return Lookup(r.Res, key) }

// TraceID returns the record's trace id (zero without trace context).
func (r LogRecord) TraceID() [16]byte { return r.LR.TraceID() }

// SpanID is derived from the record's content: log records of one span
// share its span id (or have none), but the engine tells calls apart by
// span id; a redelivered record hashes to the same id and is dropped as a
// duplicate.
func (r LogRecord) SpanID() [8]byte {
	var h xxhash.Digest
	h.Reset()
	var b [8]byte
	sid := r.LR.SpanID()
	_, _ = h.Write(sid[:])
	putUint64(&b, uint64(r.Time().UnixNano())) // the observed time when Timestamp is unset
	_, _ = h.Write(b[:])
	_, _ = h.WriteString(r.name)
	for _, k := range [...]string{"tool_use_id", "event.sequence", "gen_ai.tool.call.id", "tool_name", "session.id"} {
		if v, ok := r.LR.Attributes().Get(k); ok {
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
func (r LogRecord) ParentSpanID() [8]byte { return [8]byte{} }

// Time is the record's timestamp, else its observed time.
func (r LogRecord) Time() time.Time {
	if ts := r.LR.Timestamp(); ts != 0 {
		return ts.AsTime()
	}
	return r.LR.ObservedTimestamp().AsTime()
}

// Start is the record's time less its duration_ms (Claude Code logs a
// tool_result when the call ends), so the record and the span of the same
// call overlap and are merged into one call.
func (r LogRecord) Start() time.Time {
	t := r.Time()
	if v, ok := r.LR.Attributes().Get("duration_ms"); ok {
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

// End is the record's time.
func (r LogRecord) End() time.Time { return r.Time() }

// Status reports a rejected tool_decision as a call that failed to run;
// other log records have no status: their failures come from attributes
// (Claude Code's success = "false").
func (r LogRecord) Status() (bool, string) {
	if r.name != ClaudeToolDecision {
		return false, ""
	}
	src := "rejected"
	if v, ok := r.LR.Attributes().Get("source"); ok && v.Str() != "" {
		src = "rejected by " + v.Str()
	}
	return true, src
}

// EventCount is zero: a log record has no events.
func (r LogRecord) EventCount() int { return 0 }

// EventName is empty: a log record has no events.
func (r LogRecord) EventName(int) string { return "" }

// EventAttr finds nothing: a log record has no events.
func (r LogRecord) EventAttr(int, string) (extract.Value, bool) { return extract.Value{}, false }

var _ extract.Span = LogRecord{}
