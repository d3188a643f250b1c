package loopdetect_test

// Processor benchmarks (BENCHMARKS.md). They run only with -bench (make
// bench); none of them is a Test.
//
// BenchmarkProcessor feeds the same pdata batches, in one run, through
//   - floor:        a pass-through processor that only reads gen_ai.operation.name of every span,
//   - usage-floor:  (mix=nontool-tracked only) the floor that also sums every model span's token counts per trace,
//   - session-floor: (mix=nontool-tracked only) the usage floor that also adds each trace's sum to a count per trace kept across batches,
//   - loop_detect:  this processor at its defaults,
//   - groupbytrace: the contrib groupbytrace processor v0.165.1 (a stateful per-trace anchor),
// and reports wall and CPU time per span, spans/s per core and allocations
// per span. Run it with -cpu 1: CPU time then is one core's, and
// groupbytrace's own goroutines share that core.

import (
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/groupbytraceprocessor"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/benchref"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// meter accumulates wall time, process CPU time (all threads: the
// processor's goroutines and the GC) and heap allocations over the timed
// sections of a benchmark.
type meter struct {
	wall, cpu      time.Duration
	mallocs, bytes uint64
	gcs            uint32

	t0     time.Time
	cpu0   time.Duration
	ms0    runtime.MemStats
	active bool
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (m *meter) resume() {
	runtime.ReadMemStats(&m.ms0)
	m.cpu0 = cpuTime()
	m.t0 = time.Now()
	m.active = true
}

func (m *meter) pause() {
	if !m.active {
		return
	}
	m.wall += time.Since(m.t0)
	m.cpu += cpuTime() - m.cpu0
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs += ms.Mallocs - m.ms0.Mallocs
	m.bytes += ms.TotalAlloc - m.ms0.TotalAlloc
	m.gcs += ms.NumGC - m.ms0.NumGC
	m.active = false
}

func (m *meter) report(b *testing.B, spans int64) {
	if spans == 0 {
		return
	}
	n := float64(spans)
	b.ReportMetric(float64(m.wall.Nanoseconds())/n, "ns/span")
	b.ReportMetric(float64(m.cpu.Nanoseconds())/n, "cpu-ns/span")
	if m.cpu > 0 {
		b.ReportMetric(n/m.cpu.Seconds(), "spans/s/core")
	}
	b.ReportMetric(float64(m.mallocs)/n, "allocs/span")
	b.ReportMetric(float64(m.bytes)/n, "B/span")
	b.ReportMetric(float64(m.gcs)*1000/n, "gc/kspan")
	// The machine's speed right after the run, to tell its fast and slow
	// modes from the code's cost.
	benchref.Report(b)
}

// countingSink counts the spans it receives.
type countingSink struct{ spans atomic.Int64 }

func (s *countingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (s *countingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.spans.Add(int64(td.SpanCount()))
	return nil
}

// floor is the pass-through reference: it reads gen_ai.operation.name of
// every span, as any GenAI-aware processor must at least, and forwards the
// batch.
type floor struct {
	next consumer.Traces
	hits int64
}

func (f *floor) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *floor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				if v, ok := ss.At(k).Attributes().Get(benchdata.AttrOperationName); ok && v.Str() == "execute_tool" {
					f.hits++
				}
			}
		}
	}
	return f.next.ConsumeTraces(ctx, td)
}

// usageFloor is the reference for model spans whose usage is read: it
// reads gen_ai.operation.name as floor does and, of every span that is no
// tool call, the input and output token counts in one pass over its
// attributes, summed per trace through a memo of the batch's last trace
// (a trace's spans come together). It is the least a processor that
// counts a session's tokens does within a batch: it neither asks whether
// the session has tool calls nor keeps the sums past the batch.
//
// With counts set it is the session floor: each trace's sum in a batch
// is added to that trace's count, kept across batches in a map, one
// look-up per trace and batch as loop_detect adds a trace's tokens to its
// session. That look-up is what keeping a count per session costs at
// least: the map's entry of a trace met 1,000 batches ago is no longer
// in cache.
type usageFloor struct {
	next   consumer.Traces
	tokens int64
	counts map[pcommon.TraceID]int64
}

func (f *usageFloor) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *usageFloor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var trace pcommon.TraceID
	var sum int64
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				span := ss.At(k)
				if v, ok := span.Attributes().Get(benchdata.AttrOperationName); ok && v.Str() == "execute_tool" {
					continue
				}
				if tid := span.TraceID(); tid != trace {
					f.add(trace, sum)
					trace, sum = tid, 0
				}
				for key, v := range span.Attributes().All() {
					if key == benchdata.AttrInputTokens || key == benchdata.AttrOutputTokens {
						sum += v.Int()
					}
				}
			}
		}
	}
	f.add(trace, sum)
	return f.next.ConsumeTraces(ctx, td)
}

// add counts a trace's sum in the batch.
func (f *usageFloor) add(trace pcommon.TraceID, sum int64) {
	if sum == 0 {
		return
	}
	f.tokens += sum
	if f.counts != nil {
		f.counts[trace] += sum
	}
}

type benchProc struct {
	name string
	// renew: the pool is renewed between rounds, outside the measurement:
	// loop_detect keeps per-span state (it drops a span id it has seen as
	// a duplicate delivery). groupbytrace holds batches after returning,
	// so its pool is never rewritten.
	renew bool
	// drain: the processor forwards asynchronously; wait for every span to
	// reach the sink before stopping the clock.
	drain bool
	// trackedOnly: run only on mixes whose sessions are tracked.
	trackedOnly bool
	make        func(b *testing.B, next consumer.Traces) (consumer.Traces, func())
}

func newLoopDetect(b testing.TB, next consumer.Traces, mutate func(*loopdetect.Config)) (processor.Traces, func()) {
	f := loopdetect.NewFactory()
	cfg := f.CreateDefaultConfig().(*loopdetect.Config)
	if mutate != nil {
		mutate(cfg)
	}
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	return p, func() { _ = p.Shutdown(context.Background()) }
}

var procs = []benchProc{
	// The floor renews the pool as loop_detect does, so both read batches
	// in the same cache state (a renewal rewrites every batch; without it
	// the floor read a pool it had left warm).
	{name: "floor", renew: true, make: func(_ *testing.B, next consumer.Traces) (consumer.Traces, func()) {
		return &floor{next: next}, func() {}
	}},
	{name: "usage-floor", renew: true, trackedOnly: true, make: func(_ *testing.B, next consumer.Traces) (consumer.Traces, func()) {
		return &usageFloor{next: next}, func() {}
	}},
	{name: "session-floor", renew: true, trackedOnly: true, make: func(_ *testing.B, next consumer.Traces) (consumer.Traces, func()) {
		return &usageFloor{next: next, counts: map[pcommon.TraceID]int64{}}, func() {}
	}},
	{name: "loop_detect", renew: true, make: func(b *testing.B, next consumer.Traces) (consumer.Traces, func()) {
		return newLoopDetect(b, next, nil)
	}},
	{name: "groupbytrace", drain: true, make: func(b *testing.B, next consumer.Traces) (consumer.Traces, func()) {
		f := groupbytraceprocessor.NewFactory()
		cfg := f.CreateDefaultConfig().(*groupbytraceprocessor.Config)
		// Short enough that the drain at the end of a run stays small
		// next to the run; CPU time per span is what is compared.
		cfg.WaitDuration = 100 * time.Millisecond
		cfg.NumTraces = 100_000
		p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			b.Fatal(err)
		}
		return p, func() { _ = p.Shutdown(context.Background()) }
	}},
}

// BenchmarkProcessor: one op is one batch of 100 spans (10 sessions × 10
// spans); the per-span metrics are what to read.
//   - mix=realistic: 20 % execute_tool (200-byte args, 500-byte results), 60 % chat, 20 % invoke_agent, 10,000 sessions
//   - mix=nontool:   the same without execute_tool spans (the non-tool floor target): no session has a tool call, so none is tracked
//   - mix=nontool-tracked: the nontool batches after every session has made tool calls (the realistic batches, fed before the warm-up), so each model span's usage is read and added to its session
//   - mix=tools:     execute_tool spans only
//   - mix=tools-fresh: the same with a pool of two batches renewed between rounds, so each batch arrives just written, in cache, as a receiver hands it over (the session table stays as large)
func BenchmarkProcessor(b *testing.B) {
	mixes := []struct {
		name    string
		mix     benchdata.Mix
		tracked bool
	}{
		{"realistic", benchdata.Realistic(), false},
		{"nontool", benchdata.NonTool(), false},
		{"nontool-tracked", benchdata.NonTool(), true},
		{"tools", func() benchdata.Mix { m := benchdata.Realistic(); m.ToolEvery = 1; return m }(), false},
		{"tools-fresh", func() benchdata.Mix { m := benchdata.Realistic(); m.ToolEvery = 1; m.PoolBatches = 2; return m }(), false},
	}
	for _, mx := range mixes {
		w := benchdata.New(mx.mix)
		var pre *benchdata.Workload
		if mx.tracked {
			pre = benchdata.New(benchdata.Realistic())
		}
		for _, pr := range procs {
			if pr.trackedOnly && !mx.tracked {
				continue
			}
			b.Run("mix="+mx.name+"/proc="+pr.name, func(b *testing.B) {
				runProcessor(b, w, pre, pr)
			})
		}
	}
}

// runProcessor feeds w's batches to a new pr; pre, when set, is fed first
// (one visit of every session), outside the measurement.
func runProcessor(b *testing.B, w, pre *benchdata.Workload, pr benchProc) {
	sink := &countingSink{}
	p, stop := pr.make(b, sink)
	defer stop()
	ctx := context.Background()
	pool := w.Batches()
	per := int64(w.SpansPerBatch())
	// Warm up: one visit of every session, so the run measures the steady
	// state rather than session creation.
	warm := 10_000/int(w.SpansPerBatch()/10) + len(pool)
	next := 0
	feed := func() {
		if next == len(pool) {
			next = 0
			if pr.renew {
				w.Renew()
			}
		}
		if err := p.ConsumeTraces(ctx, pool[next]); err != nil {
			b.Fatal(err)
		}
		next++
	}
	fed := int64(0)
	if pre != nil {
		// One visit of every session, as the warm-up below: the pool
		// holds a fifth of them, so it is renewed as it runs out.
		prePool := pre.Batches()
		for i := 0; i < 10_000/int(pre.SpansPerBatch()/10)+len(prePool); i++ {
			if i > 0 && i%len(prePool) == 0 {
				pre.Renew()
			}
			td := prePool[i%len(prePool)]
			fed += int64(td.SpanCount())
			if err := p.ConsumeTraces(ctx, td); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := 0; i < warm; i++ {
		feed()
	}
	fed += int64(warm) * per
	// groupbytrace drops the spans that arrive for a trace between its
	// release and its removal, so "all spans arrived" may never come: wait
	// until the sink has all of them or has seen none for 3 × wait_duration.
	waitDrain := func(want int64) {
		last, since := sink.spans.Load(), time.Now()
		for {
			n := sink.spans.Load()
			if n >= want || time.Since(since) > 300*time.Millisecond {
				return
			}
			if n != last {
				last, since = n, time.Now()
			}
			time.Sleep(time.Millisecond)
		}
	}
	if pr.drain {
		waitDrain(fed)
	}
	runtime.GC()
	var m meter
	b.ReportAllocs()
	b.ResetTimer()
	m.resume()
	for i := 0; i < b.N; i++ {
		if next == len(pool) && pr.renew {
			b.StopTimer()
			m.pause()
			w.Renew()
			next = 0
			m.resume()
			b.StartTimer()
		}
		feed()
	}
	fed += int64(b.N) * per
	if pr.drain {
		waitDrain(fed)
	}
	m.pause()
	b.StopTimer()
	m.report(b, int64(b.N)*per)
}

// chatSpan and toolSpan build single spans for the per-span microbenchmarks.
func oneSpan(toolCall bool) (ptrace.Span, pcommon.Map) {
	m := benchdata.Realistic()
	m.PoolBatches, m.ChunksPerBatch = 1, 1
	w := benchdata.New(m)
	rs := w.Batches()[0].ResourceSpans().At(0)
	spans := rs.ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		v, _ := spans.At(i).Attributes().Get(benchdata.AttrOperationName)
		if (v.Str() == "execute_tool") == toolCall && v.Str() != "invoke_agent" {
			return spans.At(i), rs.Resource().Attributes()
		}
	}
	panic("no span")
}

var sinkBool bool

// BenchmarkSpan isolates the per-span work on one pdata span:
//   - floor-read:       Attributes().Get("gen_ai.operation.name") on a chat span
//   - classify-nontool: extract.Classify on the same chat span (what a non-tool span costs loop_detect)
//   - extract-tool:     extract.Extract of an execute_tool span (attributes + both canonical digests)
//   - screen-tool:      the prefilter's screen of that span, the pass before extraction
func BenchmarkSpan(b *testing.B) {
	x := extract.New(extract.DefaultKeys(), canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	chat, res := oneSpan(false)
	tool, tres := oneSpan(true)
	b.Run("op=floor-read", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v, ok := chat.Attributes().Get(benchdata.AttrOperationName)
			sinkBool = ok && v.Str() == "execute_tool"
		}
	})
	b.Run("op=classify-nontool", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, sinkBool = extract.Classify(x, pdataspan.Span{S: chat, Res: res})
		}
	})
	b.Run("op=extract-tool", func(b *testing.B) {
		var sc extract.Scratch
		var c engine.ToolCall
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkBool, _ = extract.Extract(x, pdataspan.Span{S: tool, Res: tres}, &sc, &c)
		}
	})
	b.Run("op=screen-tool", func(b *testing.B) {
		pre := pdataspan.NewPrefilter(x.Keys())
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sinkBool = pre.Screen(tool).MaybeTool
		}
	})
}

// eventCounter counts loop_detect transition events.
type eventCounter struct {
	events, kills int64
	states        map[string]int
}

func (e *eventCounter) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (e *eventCounter) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				evs := ss.At(k).Events()
				for l := 0; l < evs.Len(); l++ {
					if evs.At(l).Name() != loopevent.EventName {
						continue
					}
					e.events++
					a := evs.At(l).Attributes()
					if v, ok := a.Get(loopevent.AttrKill); ok && v.Bool() {
						e.kills++
					}
					if v, ok := a.Get(loopevent.AttrTo); ok {
						e.states[v.Str()]++
					}
				}
			}
		}
	}
	return nil
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// BenchmarkLoopTrace1M feeds one 1,000,000-span trace whose agent is stuck
// in a loop (every fifth span the same execute_tool call with the same
// 200-byte arguments and 500-byte result, the rest chat spans) through
// loop_detect in batches of 1,000, and reports the live heap (HeapInuse
// after a GC) and the process RSS after 10k, 100k and 1M spans. The run is
// one pass whatever b.N is: use -benchtime 1x. Memory must not grow with
// the trace.
func BenchmarkLoopTrace1M(b *testing.B) {
	const total, batch = 1_000_000, 1_000
	ec := &eventCounter{states: map[string]int{}}
	p, stop := newLoopDetect(b, ec, nil)
	defer stop()
	args := benchdata.Args("bash", 7, 200)
	result := benchdata.Result(7, 500)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "looping-agent")
	ss := rs.ScopeSpans().AppendEmpty()
	tid := benchdata.TraceID(42)
	for i := 0; i < batch; i++ {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(tid)
		a := s.Attributes()
		if i%5 == 2 {
			s.SetName("execute_tool bash")
			a.PutStr(benchdata.AttrOperationName, "execute_tool")
			a.PutStr(benchdata.AttrToolName, "bash")
			a.PutStr(benchdata.AttrToolCallArgs, args)
			a.PutStr(benchdata.AttrToolCallResult, result)
		} else {
			s.SetName("chat gpt-4.1")
			a.PutStr(benchdata.AttrOperationName, "chat")
			a.PutStr(benchdata.AttrRequestModel, "gpt-4.1")
		}
	}
	heap := func() (uint64, uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse, rssBytes()
	}
	base := time.Unix(1_750_000_000, 0)
	ctx := context.Background()
	marks := map[int]string{10_000: "10k", 100_000: "100k", total: "1M"}
	b.ResetTimer()
	var busy time.Duration
	for n := 0; n < total; n += batch {
		spans := ss.Spans()
		for i := 0; i < batch; i++ {
			s := spans.At(i)
			s.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
			var sid pcommon.SpanID
			binary.BigEndian.PutUint64(sid[:], uint64(n+i+1))
			s.SetSpanID(sid)
			t := base.Add(time.Duration(n+i) * 100 * time.Millisecond)
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(t))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(t.Add(50 * time.Millisecond)))
		}
		t0 := time.Now()
		if err := p.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		busy += time.Since(t0)
		if name, ok := marks[n+batch]; ok {
			h, r := heap()
			b.ReportMetric(float64(h)/(1<<20), "heap-MiB@"+name)
			b.ReportMetric(float64(r)/(1<<20), "rss-MiB@"+name)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(busy.Nanoseconds())/total, "ns/span")
	b.ReportMetric(float64(ec.events), "events")
	b.ReportMetric(float64(ec.kills), "kills")
	if ec.states["stuck"] == 0 {
		b.Errorf("the looping trace never became stuck: %v", ec.states)
	}
}
