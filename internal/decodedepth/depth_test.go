package decodedepth_test

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-loop/otelcol-loop/extension/decodeguard"
)

// request is an OTLP export request (traces or logs) in both encodings.
type request interface {
	MarshalProto() ([]byte, error)
	MarshalJSON() ([]byte, error)
}

// places where a request carries an AnyValue, each returning a request
// with one value there and that value.
var places = map[string]func() (request, pcommon.Value){
	"span attribute": func() (request, pcommon.Value) {
		td := ptrace.NewTraces()
		v := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().PutEmpty("a")
		return ptraceotlp.NewExportRequestFromTraces(td), v
	},
	"span event attribute": func() (request, pcommon.Value) {
		td := ptrace.NewTraces()
		v := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Events().AppendEmpty().Attributes().PutEmpty("a")
		return ptraceotlp.NewExportRequestFromTraces(td), v
	},
	"span link attribute": func() (request, pcommon.Value) {
		td := ptrace.NewTraces()
		v := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Links().AppendEmpty().Attributes().PutEmpty("a")
		return ptraceotlp.NewExportRequestFromTraces(td), v
	},
	"log body": func() (request, pcommon.Value) {
		ld := plog.NewLogs()
		v := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body()
		return plogotlp.NewExportRequestFromLogs(ld), v
	},
	"log attribute": func() (request, pcommon.Value) {
		ld := plog.NewLogs()
		v := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Attributes().PutEmpty("a")
		return plogotlp.NewExportRequestFromLogs(ld), v
	},
}

// nested builds a request whose value at place holds levels nested
// arrayValue (or kvlistValue) values.
func nested(place string, levels int, kvlist bool) request {
	req, v := places[place]()
	for range levels {
		if kvlist {
			v = v.SetEmptyMap().PutEmpty("a")
		} else {
			v = v.SetEmptySlice().AppendEmpty()
		}
	}
	v.SetStr("x")
	return req
}

func decodesProto(t *testing.T, req request) bool {
	t.Helper()
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	switch req.(type) {
	case ptraceotlp.ExportRequest:
		return ptraceotlp.NewExportRequest().UnmarshalProto(b) == nil
	default:
		return plogotlp.NewExportRequest().UnmarshalProto(b) == nil
	}
}

// jsonDepth is the deepest nesting of objects and arrays in req's JSON,
// counted outside strings.
func jsonDepth(t *testing.T, req request) int {
	t.Helper()
	b, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// TestDefaultMaxDepthMatchesProtobuf: OTLP/JSON is accepted exactly as deep
// as protobuf. For every place a trace or log request carries a value and
// both nesting shapes, the deepest request pdata decodes as protobuf is
// within decodeguard.DefaultMaxDepth in JSON, and the deepest of them all
// is exactly that.
func TestDefaultMaxDepthMatchesProtobuf(t *testing.T) {
	deepest := 0
	for place := range places {
		for _, kvlist := range []bool{false, true} {
			levels := 1
			for decodesProto(t, nested(place, levels+1, kvlist)) {
				levels++
			}
			d := jsonDepth(t, nested(place, levels, kvlist))
			t.Logf("%s, kvlist=%v: protobuf decodes %d levels = %d JSON levels", place, kvlist, levels, d)
			deepest = max(deepest, d)
		}
	}
	if deepest != decodeguard.DefaultMaxDepth {
		t.Fatalf("the deepest request protobuf decodes is %d JSON levels deep; decodeguard.DefaultMaxDepth is %d", deepest, decodeguard.DefaultMaxDepth)
	}
}
