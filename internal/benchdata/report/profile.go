package main

// Where the time goes: the CPU profiles the bench target records
// (.bench/cpu-*.prof, one -count 1 run per benchmark) read through
// `go tool pprof -raw` and attributed to stages by their stacks, so the
// explanation of a missed target is measured at the same commit as the
// target rather than written once and left to go stale.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sample is one stack the profiler saw, count times.
type sample struct {
	count int
	stack []string // function names, leaf first, inlined frames included
}

var (
	// A location's first line: "  12: 0x4a1b2c M=1 [F] <frame>"; the
	// mapping and the folded mark are optional.
	locHead = regexp.MustCompile(`^(\d+): 0x[0-9a-fA-F]+ (?:M=\d+ )?(?:\[F\] )?(.*)$`)
	// A frame: "<function> <file>:<line>:<column> s=<start line>", maybe
	// followed by "(<system name>)"; the function's name may hold spaces
	// (a generic's shape type).
	frameLine = regexp.MustCompile(`^(.*) \S*:\d+:\d+ s=\d+(?:\(.*\))?$`)
)

// parseRaw reads `go tool pprof -raw` output: in Samples a count (then the
// other values) and the location ids, leaf first; in Locations each id's
// frames, the innermost inlined one first. The text format is used rather
// than the profile's protobuf so the report needs no module beyond the
// standard library.
func parseRaw(text string) ([]sample, error) {
	var (
		section string
		raws    []rawSample
		frames  = map[int][]string{}
		cur     = -1
	)
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		switch t {
		case "Samples:", "Locations", "Mappings":
			section = t
			continue
		}
		switch section {
		case "Samples:":
			if s, ok := parseSampleLine(t); ok {
				raws = append(raws, s)
			}
		case "Locations":
			if m := locHead.FindStringSubmatch(t); m != nil {
				cur, _ = strconv.Atoi(m[1])
				frames[cur] = appendFrame(nil, m[2])
			} else if cur >= 0 && t != "" {
				frames[cur] = appendFrame(frames[cur], t)
			}
		}
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("no samples in the pprof output")
	}
	out := make([]sample, 0, len(raws))
	for _, r := range raws {
		s := sample{count: r.count}
		for _, id := range r.locs {
			f, ok := frames[id]
			if !ok {
				return nil, fmt.Errorf("sample refers to location %d, not listed", id)
			}
			s.stack = append(s.stack, f...)
		}
		out = append(out, s)
	}
	return out, nil
}

// rawSample is one line of Samples: its count and location ids.
type rawSample struct {
	count int
	locs  []int
}

// parseSampleLine reads "  3   30000000: 5 6 7 ": the first value is the
// sample count. The sample-type header and label lines have no such form.
func parseSampleLine(t string) (rawSample, bool) {
	vals, ids, ok := strings.Cut(t, ":")
	if !ok {
		return rawSample{}, false
	}
	v := strings.Fields(vals)
	if len(v) == 0 {
		return rawSample{}, false
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		return rawSample{}, false
	}
	s := rawSample{count: n}
	for _, f := range strings.Fields(ids) {
		id, err := strconv.Atoi(f)
		if err != nil {
			return rawSample{}, false
		}
		s.locs = append(s.locs, id)
	}
	return s, len(s.locs) > 0
}

// appendFrame appends the function of one frame line; a location without
// symbols adds no frame (it can belong to no stage).
func appendFrame(frames []string, line string) []string {
	m := frameLine.FindStringSubmatch(line)
	if m == nil || m[1] == "??" {
		return frames
	}
	return append(frames, m[1])
}

// funcName is a frame's name as the stage tables spell it: the last
// import-path element and what follows ("engine.(*Engine).Observe"),
// without a generic's instantiation, whose shape types would make
// names that differ by a type parameter's layout differ here.
func funcName(frame string) string {
	var b strings.Builder
	depth := 0
	for _, r := range frame {
		switch {
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	name := b.String()
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return name
	}
	// A major-version suffix ("xxhash/v2.Sum64") names no package: keep
	// the element before it.
	if majorVersion(name[i+1:]) {
		i = strings.LastIndexByte(name[:i], '/')
	}
	return name[i+1:]
}

// majorVersion says whether s begins with a module's major-version
// element: "v2." and the like.
func majorVersion(s string) bool {
	rest, ok := strings.CutPrefix(s, "v")
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	return ok && digits > 0 && strings.HasPrefix(rest[digits:], ".")
}

// entry says which samples are the benchmark's measured work: those whose
// stack holds fn. A benchmark calls the same function from its set-up too
// (the warm-up, a pre-feed), which is not measured: via, when set, must be
// a caller above fn (the timed loop's closure), and skip, when set, must
// not be.
type entry struct {
	fn, via, skip string
}

// under returns the index of fn's outermost frame in stack, or -1 when
// the sample is outside the measured work.
func (e entry) under(stack []string) int {
	at := -1
	for i, f := range stack {
		if funcName(f) == e.fn {
			at = i
		}
	}
	if at < 0 {
		return -1
	}
	via := e.via == ""
	for _, f := range stack[at+1:] {
		switch funcName(f) {
		case e.via:
			via = true
		case e.skip:
			return -1
		}
	}
	if !via {
		return -1
	}
	return at
}

// stage is one row of a table: the samples with one of funcs on their
// stack below the entry point (flat: as their leaf frame, for a flat
// profile's rows).
type stage struct {
	label string
	funcs []string
	flat  bool
}

// claims says whether s takes a sample whose entry point is stack[at]: a
// flat stage looks at the leaf frame alone (the entry point's own code
// included, so flat rows add up to the flat profile), any other stage at
// every frame below the entry point.
func (s stage) claims(stack []string, at int) bool {
	frames := stack[:at]
	if s.flat {
		frames = stack[:1]
	}
	for _, f := range frames {
		n := funcName(f)
		for _, want := range s.funcs {
			if n == want {
				return true
			}
		}
	}
	return false
}

// tally is a profile's samples under the entry point and how they split.
type tally struct {
	all    int   // every sample of the run
	total  int   // samples under the entry point
	counts []int // per stage, in the stages' order
}

// rest is the entry point's samples no stage claims.
func (t tally) rest() int {
	n := t.total
	for _, c := range t.counts {
		n -= c
	}
	return n
}

// attribute gives each sample under e to the first of stages that claims
// it, so nested stages are listed innermost first (a digest before the
// extraction that calls it) and no sample counts twice; only frames below
// the entry point are looked at, so a stage's function called from the
// benchmark's own set-up claims nothing.
func attribute(samples []sample, e entry, stages []stage) tally {
	t := tally{counts: make([]int, len(stages))}
	for _, s := range samples {
		t.all += s.count
		at := e.under(s.stack)
		if at < 0 {
			continue
		}
		t.total += s.count
		for i, st := range stages {
			if st.claims(s.stack, at) {
				t.counts[i] += s.count
				break
			}
		}
	}
	return t
}

// topFlat returns the k functions under e with the most samples as their
// leaf frame, as flat stages, most first (ties by name, so a rerun of the
// report on the same profile writes the same table).
func topFlat(samples []sample, e entry, k int) []stage {
	flat := map[string]int{}
	for _, s := range samples {
		if e.under(s.stack) >= 0 && len(s.stack) > 0 {
			flat[funcName(s.stack[0])] += s.count
		}
	}
	names := make([]string, 0, len(flat))
	for n := range flat {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if flat[names[i]] != flat[names[j]] {
			return flat[names[i]] > flat[names[j]]
		}
		return names[i] < names[j]
	})
	var out []stage
	for _, n := range names[:min(k, len(names))] {
		out = append(out, stage{label: "`" + n + "`", funcs: []string{n}, flat: true})
	}
	return out
}

// profileRun is one table: which run, which entry point, which stages.
type profileRun struct {
	title  string
	target string // the target the table explains
	bench  string // the benchmark, as named in the .txt results
	unit   string // the median that scales the shares
	prec   int    // decimals of the implied time
	bin    string // the test binary in the bench directory
	file   string // the profile in the bench directory
	entry  entry
	stages []stage // nil: the top flat functions under the entry point
	rest   string  // the label of what no stage claims
}

// The processor benchmarks feed batches through runProcessor's feed
// closure in the timed loop and the warm-up alike; the tracked mix's
// pre-feed of realistic batches calls ConsumeTraces directly, which via
// leaves out. The warm-up stays in: it cannot be told apart by function,
// its batches are a few per cent of a profiled run's and, but for each
// session's first visit, the same work.
const feedLoop = "loopdetect_test.runProcessor.func1"

// processorEntry is the loop_detect traces component's consume function:
// the detector's walk (loopdetect.(*side).consume, generic over the
// signal) and the forward.
const processorEntry = "loopdetect.(*tracesComponent).ConsumeTraces"

var (
	toolStages = []stage{
		{label: "canonical digest of the result (`canon.(*Normalizer).Result`)", funcs: []string{"canon.(*Normalizer).Result"}},
		{label: "canonical digest of the arguments (`canon.(*Normalizer).Signature`)", funcs: []string{"canon.(*Normalizer).Signature"}},
		{label: "the engine (`engine.(*Engine).Observe`: session, history, detectors)", funcs: []string{"engine.(*Engine).Observe"}},
		{label: "attribute pass (`extract.newAttrs`: the span's attributes into the key slots)", funcs: []string{"extract.newAttrs"}},
		{label: "rest of extraction (tool name, content look-ups and wrappers, failure, target, session, call id)", funcs: []string{
			"extract.extract", "extract.ExtractDeclared", "extract.Extract"}},
		{label: "prefilter screen (`pdataspan.(*Prefilter).Screen`)", funcs: []string{"pdataspan.(*Prefilter).Screen"}},
		{label: "transitions, usage sums and metrics", funcs: []string{
			"loopdetect.(*detector).observe", "loopdetect.(*detector).record", "loopdetect.attach", "loopdetect.toEvent",
			"loopdetect.(*detector).countBatch", "loopdetect.(*detector).reportStats", "loopdetect.(*detector).eventTimeTick",
			"loopdetect.(*detector).usage", "loopdetect.(*detector).flushTokens", "loopdetect.(*detector).forgetTrace"}},
	}
	// The usage rows come first: the session look-up may read attributes
	// through pcommon.Map.Get too (configured session keys), which the
	// declared-operation row must not claim.
	nontoolStages = []stage{
		{label: "token reading (`pdataspan.(*Prefilter).UsageAfter`: one pass over the span's keys through the key table)", funcs: []string{"pdataspan.(*Prefilter).UsageAfter"}},
		{label: "trace memo and the rest of the usage path (`(*detector).usage`, `traceTracked`, `Tracks`, `flushTokens`)", funcs: []string{
			"loopdetect.(*detector).usage", "loopdetect.(*detector).traceTracked", "engine.(*Engine).Tracks",
			"loopdetect.(*detector).flushTokens", "loopdetect.(*detector).forgetTrace"}},
		{label: "declared-operation look-up (`pcommon.Map.Get` in the screen)", funcs: []string{"pcommon.Map.Get"}},
		{label: "rest of the screen (`pdataspan.(*Prefilter).Screen`)", funcs: []string{"pdataspan.(*Prefilter).Screen"}},
	}
	floorStages = []stage{
		{label: "declared-operation look-up (`pcommon.Map.Get`)", funcs: []string{"pcommon.Map.Get"}},
	}
	observeStages = []stage{
		{label: "canonical digest of the 500-byte result (`canon.(*Normalizer).Result`)", funcs: []string{"canon.(*Normalizer).Result"}},
		{label: "canonical digest of the 200-byte arguments (`canon.(*Normalizer).Signature`)", funcs: []string{"canon.(*Normalizer).Signature"}},
		{label: "the detectors and state machine (`engine.(*Engine).evaluate`)", funcs: []string{"engine.(*Engine).evaluate"}},
		{label: "rest of `engine.(*Engine).Observe` (shard and session look-up, dedup, history insert, locking)", funcs: []string{"engine.(*Engine).Observe"}},
	}
)

const (
	loopRest  = "the processor's own loop (pdata walk, verdict-event check, batch state) and other"
	floorRest = "the loop itself (pdata walk, the value's comparison, the next consumer) and other"
)

// profiles are the runs the bench target records with -cpuprofile: keep
// the file names and benchmarks in step with the Makefile.
var profiles = []profileRun{
	{
		title: "Tool call through the engine", target: "≤ 0.8 µs per realistic tool call through the engine",
		bench: "BenchmarkObserve/canon=on", unit: "ns/call", prec: 0, bin: "engine.test", file: "cpu-observe.prof",
		// The warm-up gives every session its history through the same
		// feeder.observe, digests precomputed.
		entry:  entry{fn: "engine_test.(*feeder).observe", skip: "engine_test.(*feeder).warm"},
		stages: observeStages, rest: "the benchmark's loop (next session, the call's set-up) and other",
	},
	{
		title: "Tool span through the processor (`mix=tools`)", target: "≤ 1.2 µs per execute_tool span through the whole processor",
		bench: "BenchmarkProcessor/mix=tools/proc=loop_detect", unit: "cpu-ns/span", prec: 0, bin: "loopdetect.test", file: "cpu-tools.prof",
		entry: entry{fn: processorEntry, via: feedLoop}, stages: toolStages, rest: loopRest,
	},
	{
		title: "Canonicalization of dense 2 KiB search results", target: "canonicalization ≤ 0.6 ns per JSON byte",
		bench: "BenchmarkCanonicalBytes/size=2KiB/api=result", unit: "ns/byte", prec: 3, bin: "canon.test", file: "cpu-canonical-2KiB.prof",
		entry: entry{fn: "canon.(*Normalizer).Result"}, rest: "other",
	},
	{
		title: "Non-tool span, session without tool calls (`mix=nontool`)", target: "non-tool span within 1.5× the pass-through floor",
		bench: "BenchmarkProcessor/mix=nontool/proc=loop_detect", unit: "cpu-ns/span", prec: 1, bin: "loopdetect.test", file: "cpu-nontool.prof",
		entry: entry{fn: processorEntry, via: feedLoop}, stages: nontoolStages, rest: loopRest,
	},
	{
		title: "The floor on the same batches (`mix=nontool`)", target: "non-tool span within 1.5× the pass-through floor",
		bench: "BenchmarkProcessor/mix=nontool/proc=floor", unit: "cpu-ns/span", prec: 1, bin: "loopdetect.test", file: "cpu-nontool-floor.prof",
		entry: entry{fn: "loopdetect_test.(*floor).ConsumeTraces", via: feedLoop}, stages: floorStages, rest: floorRest,
	},
	{
		title: "Model span of a session with tool calls (`mix=nontool-tracked`)", target: "non-tool span within 1.5× the pass-through floor",
		bench: "BenchmarkProcessor/mix=nontool-tracked/proc=loop_detect", unit: "cpu-ns/span", prec: 1, bin: "loopdetect.test", file: "cpu-nontool-tracked.prof",
		entry: entry{fn: processorEntry, via: feedLoop}, stages: nontoolStages, rest: loopRest,
	},
	{
		title: "The floor on the same batches (`mix=nontool-tracked`)", target: "non-tool span within 1.5× the pass-through floor",
		bench: "BenchmarkProcessor/mix=nontool-tracked/proc=floor", unit: "cpu-ns/span", prec: 1, bin: "loopdetect.test", file: "cpu-nontool-tracked-floor.prof",
		entry: entry{fn: "loopdetect_test.(*floor).ConsumeTraces", via: feedLoop}, stages: floorStages, rest: floorRest,
	},
}

// flatStages is how many functions a flat table lists before "other".
const flatStages = 6

// loadProfile runs `go tool pprof -raw` on a profile of dir, symbolized
// from its test binary when that is there (a Go profile names its frames
// itself, so an absent binary only costs file names).
func loadProfile(goCmd, dir string, p profileRun) ([]sample, error) {
	prof := filepath.Join(dir, p.file)
	if _, err := os.Stat(prof); err != nil {
		return nil, err
	}
	args := []string{"tool", "pprof", "-raw"}
	if bin := filepath.Join(dir, p.bin); fileExists(bin) {
		args = append(args, bin)
	}
	out, err := exec.Command(goCmd, append(args, prof)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof: %v", err)
	}
	return parseRaw(string(out))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeProfiles writes the "Where the time goes" section: one table per
// profile, or a line saying why there is none (a .bench/ from before the
// profiles were recorded must not fail the report).
func writeProfiles(w func(string, ...any), r results, dir, goCmd string) {
	w("## Where the time goes\n\n")
	w("Each table is one `-count 1` run of the named benchmark with `-cpuprofile` (`.bench/cpu-*.prof`, test binaries built with `-trimpath` beside them for `go tool pprof`); ")
	w("a sample counts for the first stage listed whose function is on its stack below the measured entry point, shares are of the entry point's samples (set-up, batch renewal and the GC's own workers are outside it; the processor runs' warm-up, a few per cent of the tool run's batches, goes through it too), ")
	w("and the time is share × the benchmark's median above; a stage's share is sampled (100 a second), so small shares are rough.\n\n")
	for _, p := range profiles {
		w("### %s\n\n", p.title)
		samples, err := loadProfile(goCmd, dir, p)
		if err != nil {
			reason := ""
			if !os.IsNotExist(err) {
				reason = " (" + err.Error() + ")"
			}
			w("`%s` (%s): not profiled in this run%s.\n\n", p.bench, p.target, reason)
			continue
		}
		stages := p.stages
		if stages == nil {
			stages = topFlat(samples, p.entry, flatStages)
		}
		w("%s", profileTable(p, stages, attribute(samples, p.entry, stages), r.med(p.bench, p.unit)))
	}
}

// profileTable renders one tally: a row per stage, the remainder, and the
// entry point's total, which is the benchmark's median by construction.
func profileTable(p profileRun, stages []stage, t tally, median float64) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("`%s`, `.bench/%s` (%s): %d of the run's %d samples under `%s`; median %s %s.\n\n",
		p.bench, p.file, p.target, t.total, t.all, p.entry.fn, f(median, p.prec), p.unit)
	if t.total == 0 {
		w("No samples under the entry point: the profile's functions no longer match the report's names (internal/benchdata/report/profile.go).\n\n")
		return b.String()
	}
	w("| stage | samples | share | %s |\n|---|---|---|---|\n", p.unit)
	row := func(label string, n int) {
		share := float64(n) / float64(t.total)
		w("| %s | %d | %s %% | %s |\n", label, n, f(100*share, 1), f(share*median, p.prec))
	}
	for i, s := range stages {
		row(s.label, t.counts[i])
	}
	row(p.rest, t.rest())
	w("| **all of `%s`** | %d | 100 %% | %s |\n\n", p.entry.fn, t.total, f(median, p.prec))
	return b.String()
}
