package engine_test

// Engine benchmarks (BENCHMARKS.md). They run only with -bench
// (make bench); none of them is a Test.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/benchref"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// distinct is how many different argument/result pairs a working workload
// cycles through (a session never sees the same call within its history).
const distinct = 1024

type corpus struct {
	tools   []string
	args    []string
	results []string
}

func newCorpus() *corpus {
	c := &corpus{}
	for i := 0; i < distinct; i++ {
		tool := benchdata.Tools[i%len(benchdata.Tools)]
		c.tools = append(c.tools, tool)
		c.args = append(c.args, benchdata.Args(tool, uint64(i+1), 200))
		c.results = append(c.results, benchdata.Result(uint64(i+1), 500))
	}
	return c
}

func sessionKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		id := benchdata.TraceID(i)
		keys[i] = hex.EncodeToString(id[:])
	}
	return keys
}

var base = time.Unix(1_750_000_000, 0)

// feeder drives an engine with tool calls spread over sessions in a
// scrambled order (so large session counts miss the CPU caches as they
// would in production), each session's calls 1 s apart.
type feeder struct {
	eng  *engine.Engine
	norm *canon.Normalizer
	c    *corpus
	keys []string
	loop bool // every call of a session is the same call with the same result
	// hexKeys: each call's session key is written into keyBuf from the
	// session's trace id, as the processor formats it, instead of read
	// from keys: with a million keys, reading the benchmark's own copy
	// missed the caches twice a call (the slice, the string), which the
	// processor's freshly formatted key does not.
	hexKeys bool
	keyBuf  [32]byte
	n       uint64
	call    engine.ToolCall
	trans   []engine.Transition
	// precomputed digests per corpus entry (when canonicalization is not measured)
	sigs, fps []engine.Digest
}

func newFeeder(b testing.TB, cfg engine.Config, sessions int, loop bool) *feeder {
	// Sessions are spread over shards by hash: leave room so none is evicted.
	cfg.MaxSessions = max(cfg.MaxSessions, 2*sessions)
	eng, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	f := &feeder{eng: eng, norm: canon.NewNormalizer(canon.DefaultNormalizerConfig()), c: newCorpus(), keys: sessionKeys(sessions), loop: loop}
	for i := 0; i < distinct; i++ {
		s, _ := f.norm.Signature(f.c.tools[i], f.c.args[i], true)
		f.sigs = append(f.sigs, engine.Digest(s))
		f.fps = append(f.fps, engine.Digest(f.norm.Result(f.c.tools[i], f.c.results[i]).Digest))
	}
	return f
}

// next prepares call number f.n: session and corpus entry.
func (f *feeder) next() (sess, entry int, at time.Time) {
	f.n++
	nsess := uint64(len(f.keys))
	// A multiplicative scramble of the call number visits every session once per round.
	s := (f.n * 0x9E3779B1) % nsess
	round := f.n / nsess
	entry = int((f.n + round*7) % distinct)
	if f.loop {
		entry = int(s % distinct)
	}
	return int(s), entry, base.Add(time.Duration(round)*time.Second + time.Duration(s)*time.Nanosecond)
}

func (f *feeder) observe(canon bool) {
	s, e, at := f.next()
	c := &f.call
	var key string
	if f.hexKeys {
		id := benchdata.TraceID(s)
		hex.Encode(f.keyBuf[:], id[:])
		key = unsafe.String(&f.keyBuf[0], len(f.keyBuf))
	} else {
		key = f.keys[s]
	}
	*c = engine.ToolCall{Session: key, SessionSource: "trace_id", Tool: f.c.tools[e], Start: at, End: at.Add(100 * time.Millisecond)}
	binary.BigEndian.PutUint64(c.SpanID[:], f.n)
	c.FingerprintSource = engine.FingerprintResult
	if canon {
		sig, q := f.norm.Signature(c.Tool, f.c.args[e], true)
		r := f.norm.Result(c.Tool, f.c.results[e])
		c.Signature, c.Args = engine.Digest(sig), argsQuality[q]
		c.Fingerprint, c.Terminal = engine.Digest(r.Digest), r.Terminal
	} else {
		c.Signature, c.Fingerprint = f.sigs[e], f.fps[e]
	}
	f.trans = f.eng.Observe(c, at, f.trans[:0])
}

// argsQuality is the engine's quality of a signature canon made, as the
// extractor maps it.
var argsQuality = [...]engine.ArgsQuality{
	canon.ArgsJSON: engine.ArgsJSON, canon.ArgsOpaque: engine.ArgsOpaque, canon.ArgsOversized: engine.ArgsOversized, canon.ArgsAbsent: engine.ArgsAbsent,
}

// warm gives every session a full history, so runs measure the steady state.
func (f *feeder) warm(cfg engine.Config) {
	for i := 0; i < len(f.keys)*cfg.HistorySize; i++ {
		f.observe(false)
	}
}

func perCall(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/call")
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "calls/s")
	}
	benchref.Report(b)
}

// BenchmarkObserve is the cost of one tool call through the engine at the
// default settings, 10,000 sessions, working agents:
//   - canon=on:  both canonical digests (200-byte args, 500-byte result) and Observe
//   - canon=off: Observe alone (digests precomputed)
//   - canon=on/loop=stuck: every session repeats one call (stuck, killed once)
//   - sessions=N: Observe alone (digests precomputed) over N sessions, each
//     with a full history: how much of a call waits on memory as the
//     session table outgrows the caches (1,000 sessions fit in them,
//     1,000,000 do not). The session key is formatted per call from the
//     trace id (hexKeys), so the misses measured are the engine's.
func BenchmarkObserve(b *testing.B) {
	cfg := engine.DefaultConfig()
	for _, v := range []struct {
		name        string
		canon, loop bool
	}{{"canon=on", true, false}, {"canon=off", false, false}, {"canon=on/loop=stuck", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			f := newFeeder(b, cfg, 10_000, v.loop)
			f.warm(cfg)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.observe(v.canon)
			}
			perCall(b)
		})
	}
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			f := warmFeeder(b, cfg, n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.observe(false)
			}
			perCall(b)
		})
	}
}

// warmed keeps the last warmFeeder's engine: a million sessions with full
// histories take tens of seconds to build, and the benchmark function runs
// once per b.N it tries. The engine's calls simply go on where they were.
var warmed struct {
	sessions int
	f        *feeder
}

// warmFeeder returns a feeder over n sessions, each with a full history,
// reusing the previous one when it has the same number of sessions (only
// one is kept, so the memory of the last size is freed).
func warmFeeder(b *testing.B, cfg engine.Config, n int) *feeder {
	if warmed.f == nil || warmed.sessions != n {
		warmed.f = nil
		runtime.GC()
		f := newFeeder(b, cfg, n, false)
		f.hexKeys = true
		f.warm(cfg)
		warmed.sessions, warmed.f = n, f
		runtime.GC() // the warm-up's garbage is not the measured calls' business
	}
	return warmed.f
}

// BenchmarkGrowth: Observe cost per tool call (digests precomputed) as the
// history length, the longest period looked for and the session count grow.
// work=working cycles distinct calls; work=loop repeats one call per
// session (the steady state of a stuck session, where the periodicity and
// frequency scans run longest).
func BenchmarkGrowth(b *testing.B) {
	run := func(b *testing.B, cfg engine.Config, sessions int, loop bool) {
		f := newFeeder(b, cfg, sessions, loop)
		f.warm(cfg)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.observe(false)
		}
		perCall(b)
	}
	for _, work := range []string{"working", "loop"} {
		loop := work == "loop"
		for _, h := range []int{10, 50, 200} {
			b.Run(fmt.Sprintf("dim=history/work=%s/n=%d", work, h), func(b *testing.B) {
				cfg := engine.DefaultConfig()
				cfg.HistorySize = h
				run(b, cfg, 10_000, loop)
			})
		}
		for _, p := range []int{3, 5, 8} {
			b.Run(fmt.Sprintf("dim=max_period/work=%s/n=%d", work, p), func(b *testing.B) {
				cfg := engine.DefaultConfig()
				cfg.HistorySize = 16 // holds max_period 8 × 2 repetitions; same for all three
				cfg.PeriodicLoop.MaxPeriod = p
				run(b, cfg, 10_000, loop)
			})
		}
	}
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("dim=sessions/work=working/n=%d", n), func(b *testing.B) {
			cfg := engine.DefaultConfig()
			f := newFeeder(b, cfg, n, false)
			// One call per session is enough to create them all (the
			// history is allocated at its full size up front).
			for i := 0; i < n; i++ {
				f.observe(false)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.observe(false)
			}
			perCall(b)
		})
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSessionBytes measures the live heap per tracked session at the
// default settings: 100,000 sessions, each with a full history, held by one
// engine. One pass whatever b.N is (use -benchtime 1x).
func BenchmarkSessionBytes(b *testing.B) {
	for _, h := range []int{12, 50} {
		b.Run(fmt.Sprintf("history=%d", h), func(b *testing.B) {
			const n = 100_000
			cfg := engine.DefaultConfig()
			cfg.HistorySize = h
			f := newFeeder(b, cfg, n, false)
			before := liveHeap()
			for i := 0; i < n*h; i++ {
				f.observe(false)
			}
			after := liveHeap()
			runtime.KeepAlive(f)
			if got := f.eng.Stats().Sessions.Load(); got != n {
				b.Fatalf("%d sessions tracked, want %d", got, n)
			}
			b.ReportMetric(float64(after-before)/n, "B/session")
		})
	}
}
