// Package pdataspan adapts pdata spans and log records, with their
// resource, to extract.Span.
package pdataspan

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Span is a pdata span with its resource's attributes.
type Span struct {
	S   ptrace.Span
	Res pcommon.Map
}

// Value converts a pdata value; maps and slices become JSON text, bounded
// in depth and size (structured.go).
func Value(v pcommon.Value) extract.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return extract.Value{Kind: extract.KindString, Str: v.Str()}
	case pcommon.ValueTypeInt:
		return extract.Value{Kind: extract.KindInt, Int: v.Int()}
	case pcommon.ValueTypeDouble:
		return extract.Value{Kind: extract.KindDouble, Float: v.Double()}
	case pcommon.ValueTypeBool:
		return extract.Value{Kind: extract.KindBool, Bool: v.Bool()}
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		return structured(v)
	default:
		return extract.Value{Kind: extract.KindString, Str: v.AsString()}
	}
}

// Lookup reads attribute key of m as an extract.Value; the one pdata
// look-up of spans, log records and resources alike.
func Lookup(m pcommon.Map, key string) (extract.Value, bool) {
	if key == "" {
		return extract.Value{}, false
	}
	v, ok := m.Get(key)
	if !ok {
		return extract.Value{}, false
	}
	return Value(v), true
}

// ListAttrs hands the span's attributes to sink in one pass, front to back
// (Attr, pcommon.Map.Get, returns a key's first occurrence). Only wanted
// keys' values are converted, and maps, slices and bytes, whose conversion
// allocates, only if extract reads them (PutLazy). The receiver is unused:
// extract calls it on a nil *Span, so the span is never boxed.
func (*Span) ListAttrs(s Span, sink *extract.AttrSink) {
	for k, v := range s.S.Attributes().All() {
		i := sink.Want(k)
		if i < 0 {
			continue
		}
		switch v.Type() {
		case pcommon.ValueTypeStr:
			sink.Put(i, extract.Value{Kind: extract.KindString, Str: v.Str()})
		case pcommon.ValueTypeInt:
			sink.Put(i, extract.Value{Kind: extract.KindInt, Int: v.Int()})
		case pcommon.ValueTypeDouble:
			sink.Put(i, extract.Value{Kind: extract.KindDouble, Float: v.Double()})
		case pcommon.ValueTypeBool:
			sink.Put(i, extract.Value{Kind: extract.KindBool, Bool: v.Bool()})
		default:
			sink.PutLazy(i)
		}
	}
}

var _ extract.AttrLister[Span] = (*Span)(nil)

// Name returns the span name.
func (s Span) Name() string { return s.S.Name() }

// Attr looks up a span attribute.
func (s Span) Attr(key string) (extract.Value, bool) { return Lookup(s.S.Attributes(), key) }

// ResourceAttr looks up a resource attribute.
func (s Span) ResourceAttr(key string) (extract.Value, bool) { return Lookup(s.Res, key) }

// TraceID returns the trace id.
func (s Span) TraceID() [16]byte { return s.S.TraceID() }

// SpanID returns the span id.
func (s Span) SpanID() [8]byte { return s.S.SpanID() }

// ParentSpanID returns the parent span id.
func (s Span) ParentSpanID() [8]byte { return s.S.ParentSpanID() }

// Start returns the start time.
func (s Span) Start() time.Time { return s.S.StartTimestamp().AsTime() }

// End returns the end time.
func (s Span) End() time.Time { return s.S.EndTimestamp().AsTime() }

// Status reports an ERROR status and its message.
func (s Span) Status() (bool, string) {
	st := s.S.Status()
	return st.Code() == ptrace.StatusCodeError, st.Message()
}

// EventCount returns the number of span events.
func (s Span) EventCount() int { return s.S.Events().Len() }

// EventName returns the name of event i.
func (s Span) EventName(i int) string { return s.S.Events().At(i).Name() }

// EventAttr looks up an attribute of event i.
func (s Span) EventAttr(i int, key string) (extract.Value, bool) {
	return Lookup(s.S.Events().At(i).Attributes(), key)
}
