package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// stk builds a stack, leaf first, from short names under one made-up
// module, so the stages' short names match as they do on a real profile.
func stk(frames ...string) []string {
	for i, f := range frames {
		frames[i] = "example.com/m/" + f
	}
	return frames
}

// The stacks a processor profile holds, in miniature: the timed loop and
// the warm-up reach the entry point through the feed closure, a pre-feed
// reaches it directly, the pool's renewal never does, and the digest is
// called inside the extraction.
var (
	testEntry  = entry{fn: "p.consume", via: "b.feed", skip: "b.warm"}
	testStages = []stage{
		{label: "digest", funcs: []string{"engine.digest"}},
		{label: "extraction", funcs: []string{"x.extract"}},
		{label: "look-up", funcs: []string{"pcommon.Get"}},
	}
)

func TestAttribute(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []sample
		stages  []stage
		want    tally
	}{
		{
			name: "nested stages: the digest inside the extraction counts once, for the digest",
			samples: []sample{
				{3, stk("engine.xxhash", "engine.digest", "x.extract", "p.consume", "b.feed", "b.loop")},
				{2, stk("x.extract", "p.consume", "b.feed", "b.loop")},
			},
			stages: testStages,
			want:   tally{all: 5, total: 5, counts: []int{3, 2, 0}},
		},
		{
			name: "outside the entry point: the pool's renewal calls the look-up too",
			samples: []sample{
				{4, stk("pcommon.Get", "b.fill", "b.renew", "b.loop")},
				{1, stk("pcommon.Get", "p.consume", "b.feed", "b.loop")},
				{7, stk("runtime.gcBgMarkWorker")},
			},
			stages: testStages,
			want:   tally{all: 12, total: 1, counts: []int{0, 0, 1}},
		},
		{
			name: "a stage's function above the entry point claims nothing",
			samples: []sample{
				{2, stk("p.loop", "p.consume", "b.feed", "x.extract")},
			},
			stages: testStages,
			want:   tally{all: 2, total: 2, counts: []int{0, 0, 0}},
		},
		{
			name: "set-up calls of the entry point: the pre-feed (no feed closure) and the warm-up",
			samples: []sample{
				{5, stk("engine.digest", "p.consume", "b.runProcessor")},
				{6, stk("engine.digest", "p.consume", "b.feed", "b.warm")},
				{1, stk("engine.digest", "p.consume", "b.feed", "b.loop")},
			},
			stages: testStages,
			want:   tally{all: 12, total: 1, counts: []int{1, 0, 0}},
		},
		{
			name: "the entry point's own code and unlisted callees are the remainder",
			samples: []sample{
				{3, stk("p.consume", "b.feed")},
				{2, stk("runtime.memmove", "p.walk", "p.consume", "b.feed")},
			},
			stages: testStages,
			want:   tally{all: 5, total: 5, counts: []int{0, 0, 0}},
		},
		{
			name: "flat stages look at the leaf alone, the entry point's own code included",
			samples: []sample{
				{4, stk("engine.xxhash", "engine.digest", "p.consume", "b.feed")},
				{2, stk("engine.digest", "p.consume", "b.feed")},
				{1, stk("p.consume", "b.feed")},
			},
			stages: []stage{
				{label: "digest", funcs: []string{"engine.digest"}, flat: true},
				{label: "consume", funcs: []string{"p.consume"}, flat: true},
			},
			want: tally{all: 7, total: 7, counts: []int{2, 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := attribute(tc.samples, testEntry, tc.stages)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("attribute = %+v, want %+v", got, tc.want)
			}
			// Disjoint stages: what they claim never exceeds the entry
			// point's samples, so the remainder is never negative.
			if got.rest() < 0 {
				t.Fatalf("stages claim %d samples more than the entry point has", -got.rest())
			}
		})
	}
}

func TestTopFlat(t *testing.T) {
	samples := []sample{
		{5, stk("engine.xxhash", "engine.digest", "p.consume", "b.feed")},
		{3, stk("engine.scan", "engine.digest", "p.consume", "b.feed")},
		{3, stk("engine.digest", "p.consume", "b.feed")},
		{9, stk("engine.xxhash", "b.fill")}, // outside the entry point
		{1, stk("engine.unescape", "engine.digest", "p.consume", "b.feed")},
	}
	var got []string
	for _, s := range topFlat(samples, testEntry, 3) {
		got = append(got, s.funcs[0])
	}
	// Ties by name, so the table is the same on every rerun.
	want := []string{"engine.xxhash", "engine.digest", "engine.scan"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("topFlat = %v, want %v", got, want)
	}
}

func TestFuncName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/o/r/processor/loopdetect/engine.(*Engine).Observe":                                          "engine.(*Engine).Observe",
		"github.com/o/r/extract.extract[go.shape.struct { S go.opentelemetry.io/collector/pdata/ptrace.Span }]": "extract.extract",
		"github.com/o/r/extract.(*attrs[go.shape.[]uint8]).get":                                                 "extract.(*attrs).get",
		"github.com/cespare/xxhash/v2.Sum64":                                                                    "xxhash/v2.Sum64",
		"runtime.mallocgc":                                                                                      "runtime.mallocgc",
		"go.opentelemetry.io/collector/pdata/pcommon.Map.Get":                                                   "pcommon.Map.Get",
		"github.com/o/r/vendored.Func":                                                                          "vendored.Func",
	} {
		if got := funcName(in); got != want {
			t.Errorf("funcName(%q) = %q, want %q", in, got, want)
		}
	}
}

// rawText is `go tool pprof -raw` output cut down: a generic's name with
// spaces, a location with an inlined frame, one without symbols, a label
// line.
const rawText = `PeriodType: cpu nanoseconds
Period: 10000000
Samples:
samples/count cpu/nanoseconds
          2   20000000: 1 2 3 
          1   10000000: 4 3 
                {bench: x}
Locations
     1: 0x7afac4 M=1 github.com/o/r/extract.extract[go.shape.struct { S int; R string }] github.com/o/r/extract/extract.go:342:0 s=287
     2: 0x7afac5 M=1 github.com/o/r/engine.quote github.com/o/r/engine/canon.go:10:0 s=9
             github.com/o/r/engine.(*h).container github.com/o/r/engine/canon.go:50:0 s=40
     3: 0x5126ef M=1 testing.(*B).runN testing/benchmark.go:219:0 s=197
     4: 0x7fe837a9 M=2 
Mappings
1: 0x400000/0x82d000/0x0 .bench/loopdetect.test 8393 [FN]
`

func TestParseRaw(t *testing.T) {
	got, err := parseRaw(rawText)
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{
		{2, []string{
			"github.com/o/r/extract.extract[go.shape.struct { S int; R string }]",
			"github.com/o/r/engine.quote", "github.com/o/r/engine.(*h).container",
			"testing.(*B).runN",
		}},
		{1, []string{"testing.(*B).runN"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseRaw =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := parseRaw(strings.Replace(rawText, "1 2 3", "1 2 9", 1)); err == nil {
		t.Fatal("a sample with an unlisted location parsed")
	}
}

func TestProfileTableSumsToMedian(t *testing.T) {
	p := profileRun{bench: "BenchmarkX", unit: "ns/call", prec: 0, file: "cpu-x.prof", entry: testEntry, rest: "other"}
	out := profileTable(p, testStages, tally{all: 20, total: 10, counts: []int{5, 3, 0}}, 1000)
	for _, row := range []string{
		"| digest | 5 | 50.0 % | 500 |",
		"| extraction | 3 | 30.0 % | 300 |",
		"| look-up | 0 | 0.0 % | 0 |",
		"| other | 2 | 20.0 % | 200 |",
		"| **all of `p.consume`** | 10 | 100 % | 1000 |",
	} {
		if !strings.Contains(out, row) {
			t.Errorf("table lacks %q:\n%s", row, out)
		}
	}
}

// A .bench/ from before the profiles were recorded still gets a report.
func TestWriteProfilesWithoutProfiles(t *testing.T) {
	var b strings.Builder
	writeProfiles(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, results{}, t.TempDir(), "go")
	if got := strings.Count(b.String(), "not profiled in this run."); got != len(profiles) {
		t.Fatalf("%d of %d profiles said not profiled:\n%s", got, len(profiles), b.String())
	}
}
