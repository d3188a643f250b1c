package pdataspan

import (
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// deepKvlist is a kvlistValue nested n levels: {"a":{"a":…{"a":"x"}}}, the
// shape of the request that once cost 480 MB per 9.8 MB of OTLP/JSON.
func deepKvlist(n int) pcommon.Value {
	v := pcommon.NewValueMap()
	m := v.Map()
	for i := 0; i < n; i++ {
		m = m.PutEmptyMap("a")
	}
	m.PutStr("a", "x")
	return v
}

// TestStructuredValueMatchesAsString: within the bounds the JSON is the
// text pdata's AsString gives, so digests do not change.
func TestStructuredValueMatchesAsString(t *testing.T) {
	build := map[string]func() pcommon.Value{
		"flat map": func() pcommon.Value {
			v := pcommon.NewValueMap()
			v.Map().PutStr("path", "/tmp/a<b>&c \"q\" \u2028")
			v.Map().PutInt("n", -42)
			v.Map().PutDouble("f", 1.5e-7)
			v.Map().PutDouble("g", 12345678.25)
			v.Map().PutBool("ok", true)
			v.Map().PutEmptyBytes("b").FromRaw([]byte{0, 1, 2, 255})
			v.Map().PutEmpty("nil")
			return v
		},
		"nested": func() pcommon.Value {
			v := pcommon.NewValueMap()
			s := v.Map().PutEmptySlice("items")
			s.AppendEmpty().SetStr("a")
			s.AppendEmpty().SetEmptyMap().PutInt("z", 1)
			s.AppendEmpty().SetEmptySlice()
			v.Map().PutEmptyMap("empty")
			v.Map().PutEmptyMap("B").PutDouble("x", 3)
			return v
		},
		"slice":                 func() pcommon.Value { v := pcommon.NewValueSlice(); v.Slice().AppendEmpty().SetInt(7); return v },
		"empty slice":           func() pcommon.Value { return pcommon.NewValueSlice() },
		"deep within the bound": func() pcommon.Value { return deepKvlist(MaxStructuredDepth - 1) },
	}
	for name, f := range build {
		t.Run(name, func(t *testing.T) {
			v := f()
			got := Value(v)
			assert.False(t, got.Truncated)
			assert.Equal(t, v.AsString(), got.Str)
		})
	}
}

func TestStructuredValueIsBounded(t *testing.T) {
	wide := pcommon.NewValueSlice()
	for i := 0; i < MaxStructuredBytes/4; i++ {
		wide.Slice().AppendEmpty().SetStr("abcdefgh")
	}
	nan := pcommon.NewValueMap()
	nan.Map().PutDouble("x", math.NaN())
	for name, v := range map[string]pcommon.Value{
		"200,000 levels deep":        deepKvlist(200_000),
		"one level past the bound":   deepKvlist(MaxStructuredDepth),
		"wider than the byte budget": wide,
	} {
		t.Run(name, func(t *testing.T) {
			got := Value(v)
			require.True(t, got.Truncated)
			assert.LessOrEqual(t, len(got.Str), MaxStructuredBytes)
		})
	}
	assert.False(t, Value(nan).Truncated)
	assert.True(t, strings.Contains(Value(nan).Str, "null"))
}

// TestDeepValueCostsLittleMemory: rendering a 200,000-deep kvlist used to
// build the whole tree as Go maps and marshal it (hundreds of MB); it now
// stops at the depth bound.
func TestDeepValueCostsLittleMemory(t *testing.T) {
	v := deepKvlist(200_000)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := Value(v)
	runtime.ReadMemStats(&after)
	require.True(t, got.Truncated)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated rendering one deep value")
}

// BenchmarkValueDeep renders the 200,000-deep kvlist of the memory attack
// (B/op is what one such value costs; AsString took ~98 MB).
func BenchmarkValueDeep(b *testing.B) {
	v := deepKvlist(200_000)
	b.ReportAllocs()
	for b.Loop() {
		if !Value(v).Truncated {
			b.Fatal("not truncated")
		}
	}
}

// BenchmarkValueFlat renders an ordinary arguments map.
func BenchmarkValueFlat(b *testing.B) {
	v := pcommon.NewValueMap()
	v.Map().PutStr("command", "npm test -- --watch=false")
	v.Map().PutStr("cwd", "/home/agent/project")
	v.Map().PutInt("timeout", 120000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Value(v)
	}
}
