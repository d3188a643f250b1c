// Command report writes BENCHMARKS.md from the raw `go test -bench` output
// of `make bench`: machine, commit and date, the figures against the
// product's performance targets (met or not, and why), where the time goes
// (from the CPU profiles in the same directory), the ratios against the
// pass-through floor and contrib groupbytrace, and the benchstat tables.
//
//	go run ./internal/benchdata/report -benchstat .tools/benchstat -go go -dir .bench -out BENCHMARKS.md
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// results maps benchmark name (without the -GOMAXPROCS suffix) and unit to
// every sample.
type results map[string]map[string][]float64

func parse(files ...string) (results, error) {
	r := results{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
				continue
			}
			name := fields[0]
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					name = name[:i]
				}
			}
			if r[name] == nil {
				r[name] = map[string][]float64{}
			}
			for i := 2; i+1 < len(fields); i += 2 {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					break
				}
				r[name][fields[i+1]] = append(r[name][fields[i+1]], v)
			}
		}
	}
	return r, nil
}

// med returns the median of a benchmark's unit, NaN when absent.
func (r results) med(name, unit string) float64 {
	v := append([]float64(nil), r[name][unit]...)
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func run(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)) + " (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// measuredCommit names the commit whose code was measured, "-dirty" when
// the tree has changes other than the report's files themselves: the
// report an earlier run left uncommitted changes no code.
func measuredCommit(report ...string) string {
	c := run("git", "rev-parse", "--short=12", "HEAD")
	args := []string{"status", "--porcelain", "--untracked-files=no", "--", "."}
	for _, r := range report {
		args = append(args, ":(exclude)"+r)
	}
	if run("git", args...) != "" {
		c += "-dirty"
	}
	return c
}

func f(v float64, prec int) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func human(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 1e6:
		return f(v/1e6, 2) + " M"
	case v >= 1e3:
		return f(v/1e3, 1) + " k"
	}
	return f(v, 0)
}

func verdict(ok bool, measured bool) string {
	switch {
	case !measured:
		return "not measured"
	case ok:
		return "**met**"
	}
	return "**not met**"
}

// e2eP99 finds the p99 of the "with" row at rate in the e2e table.
func e2eP99(table, rate string) (float64, bool) {
	for _, l := range strings.Split(table, "\n") {
		c := strings.Split(l, "|")
		if len(c) < 9 || strings.TrimSpace(c[1]) != rate || strings.TrimSpace(c[3]) != "with" {
			continue
		}
		_, p99, ok := strings.Cut(c[7], "/")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(p99), 64)
		return v, err == nil
	}
	return 0, false
}

func main() {
	benchstat := flag.String("benchstat", ".tools/benchstat", "benchstat binary")
	dir := flag.String("dir", ".bench", "directory with processor.txt, engine.txt, growth.txt, memory.txt and optionally e2e.txt, cpu-*.prof and the test binaries")
	out := flag.String("out", "docs/BENCHMARKS.md", "file to write")
	summary := flag.String("summary", "BENCHMARKS.md", "file to write the report's summary to (its header and targets), beside the README")
	changes := flag.String("changes", "", "optional: directory of before/after comparisons (<name>/before.txt, after.txt, notes.md)")
	goCmd := flag.String("go", "go", "go command, for `go tool pprof` on the CPU profiles in -dir")
	flag.Parse()

	rp := &report{dir: *dir, benchstat: *benchstat}
	r, err := parse(rp.path("processor.txt"), rp.path("engine.txt"), rp.path("growth.txt"), rp.path("memory.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	rp.r = r
	rp.e2e, _ = os.ReadFile(rp.path("e2e.txt"))

	rp.header(*out, *summary)
	rp.targets()
	rp.why()
	rp.modes()
	writeProfiles(rp.w, r, *dir, *goCmd)
	rp.instructions()
	rp.sideBySide()
	rp.growth()
	rp.endToEnd()
	rp.audit()
	rp.benchstatTables()
	if *changes != "" {
		if err := rp.changes(*changes); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	full := rp.b.String()
	for _, f := range []struct{ path, text string }{{*out, full}, {*summary, summarize(full, *out)}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
}

// summarize is the short form of the report full, for the repository's
// root: its header and targets, then where the rest is (at path, relative
// to the root). The whole report runs to thousands of lines of tables.
func summarize(full, path string) string {
	head, _, _ := strings.Cut(full, "\n### Why\n")
	head = strings.Replace(head, "# Benchmarks\n", "# Benchmarks: the summary\n", 1)
	return head + "\nWhy each figure is what it is, where the time goes, loop_detect side by side with " +
		"the pass-through floor and groupbytrace, growth, memory, the end-to-end and audit figures and every " +
		"change measured before → after: [" + path + "](" + path + ").\n"
}

// report is BENCHMARKS.md being written from the results of one run.
type report struct {
	r         results
	b         strings.Builder
	dir       string
	benchstat string
	// e2e is the end-to-end table (e2e.txt), empty when not measured.
	e2e []byte
}

// w appends to the report.
func (rp *report) w(format string, a ...any) { fmt.Fprintf(&rp.b, format, a...) }

// path is a file of the results directory.
func (rp *report) path(n string) string { return filepath.Join(rp.dir, n) }

// proc is the BenchmarkProcessor sub-benchmark of one mix and processor.
const proc = "BenchmarkProcessor/mix=%s/proc=%s"

// cpu, allocs and rate are a processor's medians on one mix.
func (rp *report) cpu(mix, pr string) float64 {
	return rp.r.med(fmt.Sprintf(proc, mix, pr), "cpu-ns/span")
}

func (rp *report) allocs(mix, pr string) float64 {
	return rp.r.med(fmt.Sprintf(proc, mix, pr), "allocs/span")
}

func (rp *report) rate(mix, pr string) float64 {
	return rp.r.med(fmt.Sprintf(proc, mix, pr), "spans/s/core")
}

// header writes the title and the machine, commit and date of the run.
func (rp *report) header(out ...string) {
	w := rp.w
	w("# Benchmarks\n\n")
	w("Written by `make bench` (`internal/benchdata/report`); the raw `go test -bench` output is in `.bench/`. ")
	w("Figures are medians over the `-count` runs. Targets are the product's budgets (docs/design.md); they are reported against, not asserted in tests.\n\n")
	w("| | |\n|---|---|\n")
	w("| date | %s |\n", time.Now().UTC().Format(time.RFC3339))
	w("| commit | %s |\n", measuredCommit(out...))
	w("| machine | %s CPUs (nproc), %s |\n", run("nproc"), cpuModel())
	w("| Go | %s %s/%s |\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	w("| throughput runs | `-cpu 1`: one P, so CPU time is one core's (groupbytrace's own goroutines share it) |\n\n")

}

// targets writes the table of the product's budgets, met or not.
func (rp *report) targets() {
	r, w, cpu, allocs, rate := rp.r, rp.w, rp.cpu, rp.allocs, rp.rate
	obsNs := r.med("BenchmarkObserve/canon=on", "ns/call")
	obsAllocs := r.med("BenchmarkObserve/canon=on", "allocs/op")
	toolRate := rate("tools", "loop_detect")
	ntRatio := cpu("nontool", "loop_detect") / cpu("nontool", "floor")
	perSession := r.med("BenchmarkSessionBytes/history=12", "B/session")
	h10k := r.med("BenchmarkLoopTrace1M", "heap-MiB@10k")
	h1M := r.med("BenchmarkLoopTrace1M", "heap-MiB@1M")
	rss10k := r.med("BenchmarkLoopTrace1M", "rss-MiB@10k")
	rss1M := r.med("BenchmarkLoopTrace1M", "rss-MiB@1M")
	flat := h1M <= h10k*1.1+1

	w("## Targets\n\n")
	w("| target | measured | verdict |\n|---|---|---|\n")
	toolNs := cpu("tools", "loop_detect")
	toolAllocs := allocs("tools", "loop_detect")
	w("| ≥ 1,000,000 tool calls/s per core through the engine (≤ 1 µs per call) | engine, canonicalization included: %s ns/call = %s calls/s | %s |\n",
		f(obsNs, 0), human(1e9/obsNs), verdict(obsNs <= 1000, !math.IsNaN(obsNs)))
	w("| ≤ 0.8 µs per realistic tool call through the engine (200-byte arguments, 500-byte result, canonicalization included), 0 allocations | %s ns/call, %s allocs/call | %s |\n",
		f(obsNs, 0), f(obsAllocs, 0), verdict(obsNs <= 800 && obsAllocs == 0, !math.IsNaN(obsNs)))
	// The engine at scale: the session table's cache misses, with digests
	// precomputed so that the canonicalizer's share (the row above) does
	// not hide them.
	at100k := r.med("BenchmarkObserve/sessions=100000", "ns/call")
	at1M := r.med("BenchmarkObserve/sessions=1000000", "ns/call")
	w("| ≤ 0.8 µs per engine call at 100,000 sessions (digests precomputed), 0 allocations | %s ns/call at 100,000 sessions (%s at 1,000,000, %s at 1,000), %s allocs/call | %s |\n",
		f(at100k, 0), f(at1M, 0), f(r.med("BenchmarkObserve/sessions=1000", "ns/call"), 0), f(r.med("BenchmarkObserve/sessions=100000", "allocs/op"), 0),
		verdict(at100k <= 800 && r.med("BenchmarkObserve/sessions=100000", "allocs/op") == 0, !math.IsNaN(at100k)))
	w("| ≤ 1.2 µs per execute_tool span through the whole processor, 0 allocations | %s cpu-ns/span (%s spans/s/core), %s allocs/span | %s |\n",
		f(toolNs, 0), human(toolRate), f(toolAllocs, 3), verdict(toolNs <= 1200 && toolAllocs < 0.01, !math.IsNaN(toolNs)))
	perByte, canonOK, canonMeasured := rp.canonPerByte()
	w("| canonicalization ≤ 0.6 ns per JSON byte | ns/byte as a result / as arguments — %s | %s |\n",
		perByte, verdict(canonOK && canonMeasured, canonMeasured))
	trackedRatio := cpu("nontool-tracked", "loop_detect") / cpu("nontool-tracked", "floor")
	w("| non-tool span within 1.5× the pass-through floor | sessions without tool calls (`nontool`): %s vs %s cpu-ns/span = %s×; model spans of sessions with tool calls (`nontool-tracked`): %s vs %s = %s× | %s (without tool calls); %s (with) |\n",
		f(cpu("nontool", "loop_detect"), 1), f(cpu("nontool", "floor"), 1), f(ntRatio, 2),
		f(cpu("nontool-tracked", "loop_detect"), 1), f(cpu("nontool-tracked", "floor"), 1), f(trackedRatio, 2),
		verdict(ntRatio <= 1.5, !math.IsNaN(ntRatio)), verdict(trackedRatio <= 1.5, !math.IsNaN(trackedRatio)))
	usageFloor := cpu("nontool-tracked", "usage-floor")
	w("| — the same model spans against the usage floor (a consumer that only sums their token counts per trace) | usage floor %s cpu-ns/span = %s× the pass-through floor; loop_detect %s× the usage floor | reference, no budget |\n",
		f(usageFloor, 1), f(usageFloor/cpu("nontool-tracked", "floor"), 2), f(cpu("nontool-tracked", "loop_detect")/usageFloor, 2))
	sessionFloor := cpu("nontool-tracked", "session-floor")
	w("| — and against the session floor (the usage floor that also keeps a count per trace across batches, one map look-up per trace and batch) | session floor %s cpu-ns/span = %s× the pass-through floor; loop_detect %s× the session floor | reference, no budget |\n",
		f(sessionFloor, 1), f(sessionFloor/cpu("nontool-tracked", "floor"), 2), f(cpu("nontool-tracked", "loop_detect")/sessionFloor, 2))
	w("| ≤ 1 KiB per tracked session (defaults) | %s B/session (history 12, 100,000 sessions, live heap after GC) | %s |\n",
		f(perSession, 0), verdict(perSession <= 1024, !math.IsNaN(perSession)))
	w("| memory flat over a 1,000,000-span single loop trace | heap in use %s → %s MiB, RSS %s → %s MiB (10k → 1M spans) | %s |\n",
		f(h10k, 1), f(h1M, 1), f(rss10k, 1), f(rss1M, 1), verdict(flat, !math.IsNaN(h1M)))
	if p99, ok := e2eP99(string(rp.e2e), "10000"); ok {
		w("| loop-to-webhook p99 ≤ 50 ms at 10,000 spans/s | decided → webhook received p99 %s ms at 10,000 spans/s (end to end, below); span arrival → decision is synchronous in the receiver's request and not stamped under load | %s (the part measured) |\n\n", f(p99, 2), verdict(p99 <= 50, true))
	} else {
		w("| loop-to-webhook p99 ≤ 50 ms at 10,000 spans/s | not measured: run `make bench BENCH_E2E=1` | not measured |\n\n")
	}

}

// canonPerByte is the canonicalization cost per JSON byte on every corpus,
// as a result and as arguments; ok is whether all are within budget.
func (rp *report) canonPerByte() (text string, ok, measured bool) {
	r := rp.r
	// Every corpus counts toward the verdict: structure-dense search
	// results (the worst case per byte), file reads (one long escaped
	// string) and the recorded corpus (the real agents' tool payloads,
	// small documents where the per-document cost shows).
	var perByte []string
	canonOK, canonMeasured := true, false
	for _, corpus := range []struct{ label, sizes string }{
		{"dense search results", "200B 2KiB 64KiB"},
		{"file reads", "file8KiB file64KiB"},
		{"recorded corpus", "recorded"},
	} {
		var sizes []string
		for _, size := range strings.Fields(corpus.sizes) {
			var pair []string
			for _, api := range []string{"result", "signature"} {
				v := r.med("BenchmarkCanonicalBytes/size="+size+"/api="+api, "ns/byte")
				if !math.IsNaN(v) {
					canonMeasured = true
					canonOK = canonOK && v <= 0.6
				}
				pair = append(pair, f(v, 2))
			}
			label := strings.TrimPrefix(strings.TrimPrefix(size, "file"), "recorded")
			sizes = append(sizes, strings.TrimSpace(label+" "+strings.Join(pair, " / ")))
		}
		perByte = append(perByte, fmt.Sprintf("%s: %s", corpus.label, strings.Join(sizes, ", ")))
	}
	return strings.Join(perByte, "; "), canonOK, canonMeasured
}

// why writes where the budgets' figures come from.
func (rp *report) why() {
	r, w, cpu := rp.r, rp.w, rp.cpu
	w("### Why\n\n")
	w("- **Tool calls.** The engine's share (`BenchmarkObserve/canon=off`, digests precomputed) is %s ns; the rest is the two streaming canonical digests of the 200-byte arguments and 500-byte result (`BenchmarkCanonical`: %s + %s ns, against %s + %s ns for encoding/json + sorted re-encoding + SHA-256). ",
		f(r.med("BenchmarkObserve/canon=off", "ns/call"), 0),
		f(r.med("BenchmarkCanonical/doc=args200/impl=stream-xxhash", "ns/op"), 0), f(r.med("BenchmarkCanonical/doc=result500/impl=stream-xxhash", "ns/op"), 0),
		f(r.med("BenchmarkCanonical/doc=args200/impl=json-sort-sha256", "ns/op"), 0), f(r.med("BenchmarkCanonical/doc=result500/impl=json-sort-sha256", "ns/op"), 0))
	w("In the processor a tool span also pays extraction (`BenchmarkSpan/op=extract-tool`, one span warm in cache: %s ns, the two digests included): one pass over the span's attributes into the configured key slots, the resource's target, session and agent read once per resource, the wrapper checks, the failure reading. In the batch benchmark (`mix=tools`) each span's attributes and content are cold in cache (a pool of batches larger than the caches) and so is each session's history (10,000 sessions), so a tool span costs more there than its parts alone; `mix=tools-fresh`, whose batches are in cache, shows how much of that is the span's cold data (%s against %s cpu-ns/span in this run). [Where the time goes](#where-the-time-goes) gives the profile.\n",
		f(r.med("BenchmarkSpan/op=extract-tool", "ns/op"), 0), f(cpu("tools-fresh", "loop_detect"), 0), f(cpu("tools", "loop_detect"), 0))
	w("- **Non-tool spans.** A GenAI span that is no tool call costs loop_detect one attribute look-up like the floor's (its declared operation) and, per trace and batch, whether the engine tracks its session; a model span of a session with tool calls (`nontool-tracked`) also has its usage read in one pass over its keys through the token-key table, summed per trace and added once per batch. `docs/design.md` (Budgets and the hot paths) says how; [Where the time goes](#where-the-time-goes) says where the rest of the time goes, next to the floor's profile.\n")
	w("- **Bytes per session.** A 48-byte record per kept call (start, signature, fingerprint, span id, 32-bit parent and call-id digests, duration, interned tool id, attempt, flags), history_size of them in a block beside the session's chunk (576 B at the default 12; above 32 records a history grows as it fills); the session itself, 256 B (the key up to 60 bytes, times, counters, the cycle ring, trace ids); an 8-byte index slot, at most three quarters full; the description transitions carry (source, agent, client, target) shared between sessions behind a pointer; and the rarely used parts — loop state, lease, retry policy, hysteresis, token marks — allocated only when a session needs them (`docs/design.md`, The session table).\n")
	w("- **1M-span loop.** History is bounded (history_size) and digests replace content, so a trace of any length holds the same state; transition events are attached only on state changes (%s events, %s kill over the whole trace).\n\n",
		f(r.med("BenchmarkLoopTrace1M", "events"), 0), f(r.med("BenchmarkLoopTrace1M", "kills"), 0))

}

// sideBySide compares loop_detect with the floor and groupbytrace.
func (rp *report) sideBySide() {
	w, cpu, allocs, rate := rp.w, rp.cpu, rp.allocs, rp.rate
	w("## Side by side: loop_detect, the floor and groupbytrace\n\n")
	w("Same batches, same run (`BenchmarkProcessor`, 100-span batches of 10 sessions × 10 spans, 10,000 sessions). ")
	w("`realistic` = 20 %% execute_tool (200-byte JSON args, 500-byte JSON results), 60 %% chat, 20 %% invoke_agent; `nontool` = no execute_tool (so no session is tracked); `nontool-tracked` = the nontool batches after every session has made tool calls (fed the realistic batches first); `tools` = execute_tool only; `tools-fresh` = the same from a pool of two batches renewed between rounds, so each batch arrives just written, in cache, as a receiver hands it over. groupbytrace v0.165.1 runs with wait_duration 100 ms, num_traces 100,000; its CPU time includes its workers, its timers and the GC.\n\n")
	w("| mix | processor | CPU ns/span | spans/s/core | allocs/span | × floor (CPU) | × groupbytrace (CPU) |\n|---|---|---|---|---|---|---|\n")
	for _, mix := range []string{"realistic", "nontool", "nontool-tracked", "tools", "tools-fresh"} {
		for _, pr := range []string{"floor", "usage-floor", "session-floor", "loop_detect", "groupbytrace"} {
			if (pr == "usage-floor" || pr == "session-floor") && mix != "nontool-tracked" {
				continue // run on the mix whose usage is read only
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", mix, pr, f(cpu(mix, pr), 1), human(rate(mix, pr)), f(allocs(mix, pr), 2),
				f(cpu(mix, pr)/cpu(mix, "floor"), 2), f(cpu(mix, pr)/cpu(mix, "groupbytrace"), 3))
		}
	}
}

// growth writes how Observe's cost and a session's bytes grow.
func (rp *report) growth() {
	r, w := rp.r, rp.w
	h10k := r.med("BenchmarkLoopTrace1M", "heap-MiB@10k")
	h1M := r.med("BenchmarkLoopTrace1M", "heap-MiB@1M")
	rss10k := r.med("BenchmarkLoopTrace1M", "rss-MiB@10k")
	rss1M := r.med("BenchmarkLoopTrace1M", "rss-MiB@1M")
	w("\n## Growth\n\n")
	w("Observe per tool call (digests precomputed, 10,000 sessions unless the dimension is sessions). `working` cycles distinct calls; `loop` repeats one call per session (a stuck session's steady state, where the periodicity and frequency scans run longest).\n\n")
	w("| dimension | work | 1st | 2nd | 3rd |\n|---|---|---|---|---|\n")
	for _, d := range []struct {
		dim  string
		ns   []string
		work []string
	}{
		{"history", []string{"10", "50", "200"}, []string{"working", "loop"}},
		{"max_period", []string{"3", "5", "8"}, []string{"working", "loop"}},
		{"sessions", []string{"1000", "100000", "1000000"}, []string{"working"}},
	} {
		for _, work := range d.work {
			w("| %s | %s |", d.dim, work)
			for _, n := range d.ns {
				w(" %s = %s ns |", n, f(r.med(fmt.Sprintf("BenchmarkGrowth/dim=%s/work=%s/n=%s", d.dim, work, n), "ns/call"), 0))
			}
			w("\n")
		}
	}
	w("\nBytes per tracked session: history 12 (default) %s B, history 50 %s B.\n\n",
		f(r.med("BenchmarkSessionBytes/history=12", "B/session"), 0), f(r.med("BenchmarkSessionBytes/history=50", "B/session"), 0))
	w("1,000,000-span single loop trace (one session, every fifth span the same execute_tool call and result): heap in use after GC %s / %s / %s MiB and RSS %s / %s / %s MiB at 10k / 100k / 1M spans; %s ns/span.\n\n",
		f(h10k, 1), f(r.med("BenchmarkLoopTrace1M", "heap-MiB@100k"), 1), f(h1M, 1),
		f(rss10k, 1), f(r.med("BenchmarkLoopTrace1M", "rss-MiB@100k"), 1), f(rss1M, 1), f(r.med("BenchmarkLoopTrace1M", "ns/span"), 0))

}

// endToEnd writes the end-to-end table, when it was measured.
func (rp *report) endToEnd() {
	w, e2e := rp.w, rp.e2e
	w("## End to end\n\n")
	if len(e2e) > 0 {
		w("`make bench BENCH_E2E=1` (`internal/benchdata/e2e`): the otelcol-loop distribution (OTLP/HTTP receiver → memory_limiter → [loop_detect] → alert_sink), fed over loopback by `loopagent --load` (500 sessions, 10 %% of them looping, 20 %% execute_tool spans), one run per row; collector CPU and RSS read from /proc during the load (CPU in 10 ms ticks), kill webhooks timestamped by a local receiver standing in for the supervisor. The agent and the collector share the 2 CPUs. Latency is `decided_at` (in the webhook body, loop_detect's clock) → webhook received (same machine's clock); with 50 kills per run, p99 is the largest. `docs/latency.md` measures span arrival → webhook without load (median 0.89 ms, p99 1.22 ms).\n\n%s\n", e2e)
	} else {
		w("Not measured in this run (`make bench BENCH_E2E=1` runs it). `docs/latency.md` reports the kill latency without background load.\n\n")
	}

}

// audit points to the figures of loopreplay's audit at scale, which make
// bench-audit measures and writes to a file of their own.
func (rp *report) audit() {
	rp.w("## Audit of past sessions\n\n")
	rp.w("`make bench-audit` (`internal/benchdata/audit`, not part of this run) measures `loopreplay --summary` over 100 and 1,000 generated sessions of mixed CLIs (some 200 MB): files/s, MB/s and peak RSS, in [BENCHMARKS-audit.md](../BENCHMARKS-audit.md), written by the run that measured them.\n\n")
}

// bs runs benchstat with args and returns its output, or why it failed.
func (rp *report) bs(args ...string) string {
	out, err := exec.Command(rp.benchstat, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("benchstat failed: %v\n%s", err, out)
	}
	return string(out)
}

// benchstatTables writes benchstat's tables of each results file.
func (rp *report) benchstatTables() {
	w, bs, p := rp.w, rp.bs, rp.path
	w("## benchstat\n\n")
	for _, s := range []struct{ title, file string }{
		{"Processor throughput and per-span cost (columns: processor)", "processor.txt"},
		{"Engine", "engine.txt"},
		{"Growth", "growth.txt"},
		{"Memory", "memory.txt"},
	} {
		args := []string{p(s.file)}
		if s.file == "processor.txt" {
			args = []string{"-col", "/proc", "-filter", ".name:Processor", p(s.file)}
		}
		w("### %s\n\n```\n%s```\n\n", s.title, bs(args...))
		if s.file == "processor.txt" {
			w("```\n%s```\n\n", bs("-filter", ".name:Span", p(s.file)))
		}
	}
}

// changes writes each before/after comparison under dir: a change
// directory holds a pair run side by side and the notes that say what
// changed; they are reported in name order.
func (rp *report) changes(dir string) error {
	w, bs := rp.w, rp.bs
	dirs, _ := filepath.Glob(filepath.Join(dir, "*", "notes.md"))
	sort.Strings(dirs)
	for _, notes := range dirs {
		d := filepath.Dir(notes)
		text, err := os.ReadFile(notes)
		if err != nil {
			return err
		}
		w("%s\n```\n%s```\n\n", text, bs("before="+filepath.Join(d, "before.txt"), "after="+filepath.Join(d, "after.txt")))
		// A loaded-machine rerun of the same comparison, when there is one.
		if _, err := os.Stat(filepath.Join(d, "loaded-after.txt")); err == nil {
			w("The same comparison on a loaded machine (`loaded-*.txt`: both cores kept busy by two other processes during the runs):\n\n```\n%s```\n\n",
				bs("before="+filepath.Join(d, "loaded-before.txt"), "after="+filepath.Join(d, "loaded-after.txt")))
		}
	}
	return nil
}

// instructions writes the instruction counts make bench-instructions left
// in instructions.txt ("name count" lines), or says they were not measured.
func (rp *report) instructions() {
	w := rp.w
	w("## Instructions\n\n")
	data, err := os.ReadFile(rp.path("instructions.txt"))
	if err != nil {
		w("Not measured (`make bench-instructions` needs valgrind).\n\n")
		return
	}
	n := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				n[f[0]] = v
			}
		}
	}
	get := func(k string) float64 {
		if v, ok := n[k]; ok {
			return v
		}
		return math.NaN()
	}
	w("Counted by callgrind (`make bench-instructions`, `scripts/bench-instructions.sh` on the test binaries above): the same count for the same binary whatever else the machine does, where the timings above swing. It says nothing of cache misses. The processor's rows count a 100-span batch with the pool's renewal, which is the same for every processor of a mix, so they are given as differences per span.\n\n")
	w("| what | instructions |\n|---|---|\n")
	w("| engine call, canonicalization included (`BenchmarkObserve/canon=on`) | %s a call |\n", f(get("observe-canon"), 0))
	w("| engine call, digests precomputed (`BenchmarkObserve/canon=off`) | %s a call |\n", f(get("observe-nocanon"), 0))
	doc := get("canonical-2KiB")
	w("| canonical digest of a dense 2 KiB search result (`BenchmarkCanonicalBytes/size=2KiB/api=result`) | %s a document, %s a byte |\n", f(doc, 0), f(doc/float64(2<<10), 1))
	span := func(mix, a, b string) float64 {
		return (get("processor/"+mix+"/"+a) - get("processor/"+mix+"/"+b)) / 100
	}
	w("| `nontool`: loop_detect beyond the pass-through floor | %s a span |\n", f(span("nontool", "loop_detect", "floor"), 0))
	w("| `nontool-tracked`: the usage floor beyond the pass-through floor | %s a span |\n", f(span("nontool-tracked", "usage-floor", "floor"), 0))
	w("| `nontool-tracked`: loop_detect beyond the usage floor | %s a span |\n", f(span("nontool-tracked", "loop_detect", "usage-floor"), 0))
	w("| `nontool-tracked`: loop_detect beyond the session floor | %s a span |\n\n", f(span("nontool-tracked", "loop_detect", "session-floor"), 0))
}
