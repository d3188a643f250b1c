package sdkprocessor

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// span adapts an sdktrace.ReadOnlySpan to extract.Span. The processor
// passes a pointer into its pooled per-call memory: extract's helpers take
// the Span interface, and boxing a pointer allocates nothing (boxing this
// four-word struct would, once per helper). The slices are read once from
// the span, because ReadOnlySpan methods are interface calls.
type span struct {
	s      sdktrace.ReadOnlySpan
	attrs  []attribute.KeyValue
	res    *attribute.Set
	events []sdktrace.Event
}

func (sp *span) reset(s sdktrace.ReadOnlySpan) {
	*sp = span{s: s, attrs: s.Attributes(), res: s.Resource().Set(), events: s.Events()}
}

// lookup scans attributes linearly: spans carry few, and the SDK keeps
// them unsorted. The last value wins, as in the SDK's own deduplication.
func lookup(kvs []attribute.KeyValue, key string) (extract.Value, bool) {
	if key == "" {
		return extract.Value{}, false
	}
	for i := len(kvs) - 1; i >= 0; i-- {
		if string(kvs[i].Key) == key {
			return value(kvs[i].Value), true
		}
	}
	return extract.Value{}, false
}

// value converts an attribute value the way the collector sees it after
// OTLP export (pdataspan.Value): scalars keep their type, slices and maps
// become JSON text, bytes become base64.
func value(v attribute.Value) extract.Value {
	switch v.Type() {
	case attribute.STRING:
		return extract.Value{Kind: extract.KindString, Str: v.AsString()}
	case attribute.INT64:
		return extract.Value{Kind: extract.KindInt, Int: v.AsInt64()}
	case attribute.FLOAT64:
		return extract.Value{Kind: extract.KindDouble, Float: v.AsFloat64()}
	case attribute.BOOL:
		return extract.Value{Kind: extract.KindBool, Bool: v.AsBool()}
	case attribute.BYTESLICE:
		return extract.Value{Kind: extract.KindString, Str: base64.StdEncoding.EncodeToString(v.AsByteSlice())}
	case attribute.EMPTY:
		return extract.Value{Kind: extract.KindString}
	default:
		b, err := json.Marshal(raw(v))
		if err != nil { // non-finite floats: keep the SDK's own rendering
			return extract.Value{Kind: extract.KindStructured, Str: v.String()}
		}
		return extract.Value{Kind: extract.KindStructured, Str: string(b)}
	}
}

// raw turns a structured attribute value into plain Go values for JSON.
func raw(v attribute.Value) any {
	switch v.Type() {
	case attribute.SLICE:
		vs := v.AsSlice()
		out := make([]any, len(vs))
		for i := range vs {
			out[i] = raw(vs[i])
		}
		return out
	case attribute.MAP:
		kvs := v.AsMap()
		out := make(map[string]any, len(kvs))
		for _, kv := range kvs {
			out[string(kv.Key)] = raw(kv.Value)
		}
		return out
	case attribute.EMPTY:
		return nil
	}
	return v.AsInterface()
}

func (s *span) Name() string { return s.s.Name() }

func (s *span) Attr(key string) (extract.Value, bool) { return lookup(s.attrs, key) }

// ListAttrs hands the span's attributes to sink in one pass, back to front
// (Attr returns a key's last occurrence). Only wanted keys' values are
// converted, and slices, maps and bytes, whose conversion allocates, only if
// extract reads them (PutLazy). The receiver is unused: extract calls it on
// a nil *span.
func (*span) ListAttrs(s *span, sink *extract.AttrSink) {
	for i := len(s.attrs) - 1; i >= 0; i-- {
		kv := &s.attrs[i]
		j := sink.Want(string(kv.Key))
		if j < 0 {
			continue
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			sink.Put(j, extract.Value{Kind: extract.KindString, Str: kv.Value.AsString()})
		case attribute.INT64:
			sink.Put(j, extract.Value{Kind: extract.KindInt, Int: kv.Value.AsInt64()})
		case attribute.FLOAT64:
			sink.Put(j, extract.Value{Kind: extract.KindDouble, Float: kv.Value.AsFloat64()})
		case attribute.BOOL:
			sink.Put(j, extract.Value{Kind: extract.KindBool, Bool: kv.Value.AsBool()})
		case attribute.EMPTY:
			sink.Put(j, extract.Value{Kind: extract.KindString})
		default:
			sink.PutLazy(j)
		}
	}
}

func (s *span) ResourceAttr(key string) (extract.Value, bool) {
	if key == "" {
		return extract.Value{}, false
	}
	v, ok := s.res.Value(attribute.Key(key))
	if !ok {
		return extract.Value{}, false
	}
	return value(v), true
}

func (s *span) TraceID() [16]byte { return s.s.SpanContext().TraceID() }

func (s *span) SpanID() [8]byte { return s.s.SpanContext().SpanID() }

func (s *span) ParentSpanID() [8]byte { return s.s.Parent().SpanID() }

func (s *span) Start() time.Time { return s.s.StartTime() }

func (s *span) End() time.Time { return s.s.EndTime() }

func (s *span) Status() (bool, string) {
	st := s.s.Status()
	return st.Code == codes.Error, st.Description
}

func (s *span) EventCount() int { return len(s.events) }

func (s *span) EventName(i int) string { return s.events[i].Name }

func (s *span) EventAttr(i int, key string) (extract.Value, bool) {
	return lookup(s.events[i].Attributes, key)
}

var (
	_ extract.Span              = (*span)(nil)
	_ extract.AttrLister[*span] = (*span)(nil)
)
