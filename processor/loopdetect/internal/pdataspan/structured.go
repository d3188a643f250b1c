package pdataspan

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// The bounds of a structured (map or slice) value rendered as JSON. A
// sender chooses the shape of its attributes: a 200,000-deep kvlistValue
// (9.8 MB of OTLP/JSON) once cost 480 MB, because pdata's AsString builds
// the whole tree as Go maps before marshalling it. Rendering stops at
// either bound and the value takes the oversized path.
const (
	// MaxStructuredDepth is the deepest nesting rendered (the canonicalizer
	// gives up at the same depth).
	MaxStructuredDepth = 64
	// MaxStructuredBytes is the most JSON text rendered for one value.
	MaxStructuredBytes = 1 << 20
)

// structured renders a map or slice as the JSON text AsString would give
// (keys sorted, the last of duplicate keys kept), written straight from
// pdata within the bounds above. Beyond them it returns the text written so
// far with Truncated set.
func structured(v pcommon.Value) extract.Value {
	e := jsonWriter{buf: make([]byte, 0, 256)}
	ok := e.value(v, 0)
	return extract.Value{Kind: extract.KindStructured, Str: string(e.buf), Truncated: !ok}
}

type jsonWriter struct {
	buf []byte
}

// room says whether n more bytes fit the budget.
func (e *jsonWriter) room(n int) bool { return len(e.buf)+n <= MaxStructuredBytes }

// value writes v and reports false when a bound was reached.
func (e *jsonWriter) value(v pcommon.Value, depth int) bool {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		if depth >= MaxStructuredDepth {
			return false
		}
		return e.object(v.Map(), depth+1)
	case pcommon.ValueTypeSlice:
		if depth >= MaxStructuredDepth {
			return false
		}
		return e.array(v.Slice(), depth+1)
	case pcommon.ValueTypeStr:
		return e.str(v.Str())
	case pcommon.ValueTypeInt:
		if !e.room(20) {
			return false
		}
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return e.float(v.Double())
	case pcommon.ValueTypeBool:
		if !e.room(5) {
			return false
		}
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case pcommon.ValueTypeBytes:
		b := v.Bytes()
		if !e.room(b.Len()*4/3 + 4) {
			return false
		}
		out, _ := json.Marshal(b.AsRaw()) // base64, as AsString
		e.buf = append(e.buf, out...)
	default:
		if !e.room(4) {
			return false
		}
		e.buf = append(e.buf, "null"...)
	}
	return true
}

func (e *jsonWriter) str(s string) bool {
	if !e.room(len(s) + 2) {
		return false
	}
	if !needsEscape(s) {
		e.buf = append(append(append(e.buf, '"'), s...), '"')
		return true
	}
	// encoding/json's escaping without the HTML part, as AsString.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
	if !e.room(len(out)) {
		return false
	}
	e.buf = append(e.buf, out...)
	return true
}

// needsEscape reports whether encoding/json would escape any of s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}

func (e *jsonWriter) float(f float64) bool {
	if !e.room(32) {
		return false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// encoding/json refuses these (AsString then gives up on the
		// whole value); null keeps the rest of the value usable.
		e.buf = append(e.buf, "null"...)
		return true
	}
	out, _ := json.Marshal(f)
	e.buf = append(e.buf, out...)
	return true
}

func (e *jsonWriter) object(m pcommon.Map, depth int) bool {
	// Every member costs at least `"":0,` — refuse at once what cannot fit,
	// before collecting the keys.
	if !e.room(2 + 5*m.Len()) {
		return false
	}
	type member struct {
		key string
		v   pcommon.Value
	}
	members := make([]member, 0, m.Len())
	for k, v := range m.All() {
		members = append(members, member{k, v})
	}
	slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	e.buf = append(e.buf, '{')
	first := true
	for i := range members {
		if i+1 < len(members) && members[i+1].key == members[i].key {
			continue // AsRaw keeps the last of duplicate keys
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		if !e.str(members[i].key) || !e.room(1) {
			return false
		}
		e.buf = append(e.buf, ':')
		if !e.value(members[i].v, depth) {
			return false
		}
	}
	if !e.room(1) {
		return false
	}
	e.buf = append(e.buf, '}')
	return true
}

func (e *jsonWriter) array(s pcommon.Slice, depth int) bool {
	if !e.room(2 + 2*s.Len()) {
		return false
	}
	e.buf = append(e.buf, '[')
	for i := 0; i < s.Len(); i++ {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if !e.value(s.At(i), depth) {
			return false
		}
	}
	if !e.room(1) {
		return false
	}
	e.buf = append(e.buf, ']')
	return true
}
