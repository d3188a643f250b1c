package sdkprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// TestValueMatchesCollector: an attribute reads the same in-process as it
// does in the collector after OTLP export, so verdicts agree.
func TestValueMatchesCollector(t *testing.T) {
	pm := func(f func(pcommon.Value)) pcommon.Value { v := pcommon.NewValueEmpty(); f(v); return v }
	cases := []struct {
		name string
		sdk  attribute.Value
		pd   pcommon.Value
	}{
		{"string", attribute.StringValue(`{"a":1}`), pcommon.NewValueStr(`{"a":1}`)},
		{"int", attribute.Int64Value(42), pcommon.NewValueInt(42)},
		{"double", attribute.Float64Value(1.5), pcommon.NewValueDouble(1.5)},
		{"bool", attribute.BoolValue(true), pcommon.NewValueBool(true)},
		{"bytes", attribute.ByteSliceValue([]byte{0, 1, 0xff}), pcommon.NewValueBytes()},
		{"strings", attribute.StringSliceValue([]string{"x", "y"}), pm(func(v pcommon.Value) { _ = v.SetEmptySlice().FromRaw([]any{"x", "y"}) })},
		{"bools", attribute.BoolSliceValue([]bool{true, false}), pm(func(v pcommon.Value) { _ = v.SetEmptySlice().FromRaw([]any{true, false}) })},
		{"ints", attribute.Int64SliceValue([]int64{1, 2}), pm(func(v pcommon.Value) { _ = v.SetEmptySlice().FromRaw([]any{int64(1), int64(2)}) })},
		{"floats", attribute.Float64SliceValue([]float64{0.5, 2}), pm(func(v pcommon.Value) { _ = v.SetEmptySlice().FromRaw([]any{0.5, 2.0}) })},
		{"map", attribute.MapValue(attribute.String("z", "1"), attribute.Int("a", 2), attribute.Map("m", attribute.Bool("b", true))),
			pm(func(v pcommon.Value) {
				_ = v.SetEmptyMap().FromRaw(map[string]any{"z": "1", "a": int64(2), "m": map[string]any{"b": true}})
			})},
		{"slice", attribute.SliceValue(attribute.StringValue("s"), attribute.Int64Value(3)),
			pm(func(v pcommon.Value) { _ = v.SetEmptySlice().FromRaw([]any{"s", int64(3)}) })},
	}
	cases[4].pd.SetEmptyBytes().FromRaw([]byte{0, 1, 0xff})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, pdataspan.Value(c.pd), value(c.sdk))
		})
	}
}
