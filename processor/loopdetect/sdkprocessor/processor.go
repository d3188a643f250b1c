// Package sdkprocessor runs loop_detect's detection engine inside a Go
// agent, as an OpenTelemetry SDK span processor: no collector needed.
//
// Register the Processor with the agent's TracerProvider. Every ended span
// goes through the same extraction code as the collector processor
// (extract.Extract) and, if it is a tool call, into the same engine with
// the same defaults. Each state transition reaches the WithCallback
// function; a kill decision cancels the contexts the agent registered for
// that session with StartRun, Register or RegisterTrace, with a *KillError
// cause.
//
//	p, err := sdkprocessor.New(sdkprocessor.WithCallback(func(t engine.Transition) { log.Print(t.Explanation) }))
//	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithBatcher(exp))
//	ctx, end := p.StartRun(ctx, tp, "invoke_agent") // one run = one session, cancelled on a kill
//	defer end()
package sdkprocessor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// ErrKilled is what every kill cause matches with errors.Is.
var ErrKilled = errors.New("loopdetect: agent session killed")

// KillError is the cause of a context cancelled by a kill decision:
// context.Cause(ctx) returns it. It matches ErrKilled with errors.Is.
type KillError struct {
	// Transition is the decision, with its Explanation, Reason and evidence.
	Transition engine.Transition
}

func (e *KillError) Error() string {
	return "loopdetect: agent session " + e.Transition.Session + " killed: " + e.Transition.Explanation
}

// Unwrap returns ErrKilled.
func (e *KillError) Unwrap() error { return ErrKilled }

// Stats are the processor's counters since New.
type Stats struct {
	// Spans counts spans seen by OnEnd.
	Spans int64
	// ToolCalls counts spans extracted as tool calls.
	ToolCalls int64
	// Malformed, Oversized and BadEvidence count degraded tool calls
	// (extract.Outcome).
	Malformed, Oversized, BadEvidence int64
	// Transitions counts transitions decided; Kills those with Kill set
	// (dry-run kills are not counted here but in DryRunKills).
	Transitions, Kills, DryRunKills int64
	// ContextsCancelled counts registered contexts cancelled by kills.
	ContextsCancelled int64
	// CallbacksDropped counts transitions the full callback queue refused.
	CallbacksDropped int64
	// Warnings counts calls of the WithWarn function.
	Warnings int64
	// Sessions is the number of sessions tracked; Evicted and Expired count
	// sessions dropped by the MaxSessions cap and IdleTimeout; Duplicates
	// and OutOfOrder count calls dropped as duplicates and calls placed
	// by start time.
	Sessions, Evicted, Expired, Duplicates, OutOfOrder int64
}

// Processor is an sdktrace.SpanProcessor that detects looping agents. It
// is safe for concurrent use.
type Processor struct {
	eng   *engine.Engine
	x     *extract.Extractor
	now   func() time.Time
	cb    func(engine.Transition)
	warn  func(Warning)
	async bool
	pool  sync.Pool

	spans, calls, malformed, oversized, badEvidence atomic.Int64
	transitions, kills, dryRunKills, cancelled      atomic.Int64
	dropped                                         atomic.Int64
	warns                                           atomic.Int64

	regMu sync.Mutex
	regs  map[string][]*registration

	// queueMu guards sends on queue against its close in Shutdown.
	queueMu sync.RWMutex
	closed  bool
	queue   chan queued

	tickMu   sync.Mutex // serializes Tick and its transition buffer
	tickBuf  []engine.Transition
	stop     chan struct{}
	done     sync.WaitGroup
	shutdown sync.Once
	isDown   atomic.Bool
}

var _ sdktrace.SpanProcessor = (*Processor)(nil)

// queued is a transition for the callback, or a flush marker.
type queued struct {
	t     *engine.Transition
	flush chan struct{}
}

type registration struct {
	session string
	cancel  context.CancelCauseFunc
}

// work is OnEnd's per-call memory, pooled so the hot path allocates
// nothing.
type work struct {
	span  span
	call  engine.ToolCall
	sc    extract.Scratch
	trans []engine.Transition
}

// New returns a Processor with the collector processor's defaults,
// changed by opts. It starts the ticker goroutine and, with a callback
// and a non-zero queue, the callback goroutine; Shutdown stops both.
func New(opts ...Option) (*Processor, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.sessionSet {
		o.keys.Session = o.sessionKeys
	}
	o.keys.Waits = o.engine.ImplicitWait // the polls the engine grants implicit leases
	if err := o.validate(); err != nil {
		return nil, errors.Join(errors.New("sdkprocessor"), err)
	}
	eng, err := engine.New(o.engine)
	if err != nil {
		return nil, errors.Join(errors.New("sdkprocessor"), err)
	}
	p := &Processor{
		eng:  eng,
		x:    extract.New(o.keys, canon.NewNormalizer(o.normalizer)),
		now:  o.clock,
		cb:   o.callback,
		warn: o.warn,
		regs: make(map[string][]*registration),
		stop: make(chan struct{}),
	}
	p.pool.New = func() any { return new(work) }
	if p.cb != nil && o.queue > 0 {
		p.async = true
		p.queue = make(chan queued, o.queue)
		p.done.Add(1)
		go p.dispatch()
	}
	if o.tick > 0 {
		p.done.Add(1)
		go p.ticker(o.tick)
	}
	return p, nil
}

// OnStart does nothing: tool calls are judged when they end.
func (p *Processor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd extracts a tool call from s and feeds it to the engine. It never
// blocks on I/O: kills cancel contexts in place, and the callback is
// queued (or, with WithCallbackQueue(0), called in place).
func (p *Processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if p.isDown.Load() {
		return
	}
	p.spans.Add(1)
	w := p.pool.Get().(*work)
	w.span.reset(s)
	ok, out := extract.Extract(p.x, &w.span, &w.sc, &w.call)
	if ok {
		p.calls.Add(1)
		if out.Malformed {
			p.malformed.Add(1)
		}
		if out.Oversized {
			p.oversized.Add(1)
		}
		if out.BadEvidence {
			p.badEvidence.Add(1)
		}
		w.trans = p.eng.Observe(&w.call, p.now(), w.trans[:0])
		p.handle(w.trans)
		clear(w.trans)
		w.call = engine.ToolCall{} // drop references into the span
	} else {
		p.usage(w)
	}
	w.span = span{}
	p.pool.Put(w)
}

// Tick runs the engine's timers (wait lease expiry, backstop, idle
// expiry) at the processor's clock. The ticker goroutine calls it every
// tick interval; call it yourself with WithTickInterval(0).
func (p *Processor) Tick() {
	if p.isDown.Load() {
		return
	}
	p.tickMu.Lock()
	defer p.tickMu.Unlock()
	if p.isDown.Load() {
		return
	}
	p.tickBuf = p.eng.Tick(p.now(), p.tickBuf[:0])
	p.handle(p.tickBuf)
	clear(p.tickBuf)
}

func (p *Processor) ticker(every time.Duration) {
	defer p.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.Tick()
		}
	}
}

// handle acts on transitions: kills first (so the agent's context is
// cancelled before span.End returns), then the callback.
func (p *Processor) handle(trans []engine.Transition) {
	for i := range trans {
		t := &trans[i]
		p.transitions.Add(1)
		if t.DryRun {
			p.dryRunKills.Add(1)
		}
		p.warnFor(t)
		if t.Kill {
			p.kills.Add(1)
			p.kill(t)
		}
		if p.cb == nil {
			continue
		}
		if !p.async {
			p.cb(*t)
			continue
		}
		p.enqueue(t)
	}
}

func (p *Processor) enqueue(t *engine.Transition) {
	c := new(engine.Transition)
	*c = *t
	p.queueMu.RLock()
	defer p.queueMu.RUnlock()
	if p.closed {
		p.dropped.Add(1)
		return
	}
	select {
	case p.queue <- queued{t: c}:
	default:
		p.dropped.Add(1)
	}
}

func (p *Processor) dispatch() {
	defer p.done.Done()
	for q := range p.queue {
		if q.flush != nil {
			close(q.flush)
			continue
		}
		p.cb(*q.t)
	}
}

// kill cancels every context registered for the transition's session.
func (p *Processor) kill(t *engine.Transition) {
	p.regMu.Lock()
	regs := p.regs[t.Session]
	delete(p.regs, t.Session)
	p.regMu.Unlock()
	if len(regs) == 0 {
		return
	}
	cause := &KillError{Transition: *t}
	for _, r := range regs {
		r.cancel(cause)
	}
	p.cancelled.Add(int64(len(regs)))
}

// Register returns a child of parent that is cancelled, with a *KillError
// cause (context.Cause), when the engine decides to kill session: the
// session key the processor derives from the agent's spans (the trace id
// in lowercase hex by default, else the value of the first WithSessionKeys
// attribute found). The returned function cancels the context with the
// given cause (nil: context.Canceled) and should be called when the run
// ends; the registration is dropped whenever the context is done. A kill
// decided before Register is not replayed. Several contexts may be
// registered for one session; a kill cancels them all.
func (p *Processor) Register(parent context.Context, session string) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	r := &registration{session: session, cancel: cancel}
	p.regMu.Lock()
	p.regs[session] = append(p.regs[session], r)
	p.regMu.Unlock()
	context.AfterFunc(ctx, func() { p.unregister(r) })
	return ctx, cancel
}

// RegisterTrace is Register for the trace of the span in parent, for the
// default session key (the trace id). Without a valid span context in
// parent it registers nothing and returns a plain cancellable context.
func (p *Processor) RegisterTrace(parent context.Context) (context.Context, context.CancelCauseFunc) {
	sc := trace.SpanContextFromContext(parent)
	if !sc.TraceID().IsValid() {
		return context.WithCancelCause(parent)
	}
	return p.Register(parent, sc.TraceID().String())
}

func (p *Processor) unregister(r *registration) {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	regs := p.regs[r.session]
	for i, x := range regs {
		if x == r {
			regs[i] = regs[len(regs)-1]
			regs[len(regs)-1] = nil
			regs = regs[:len(regs)-1]
			break
		}
	}
	if len(regs) == 0 {
		delete(p.regs, r.session)
	} else {
		p.regs[r.session] = regs
	}
}

// ForceFlush waits until the callback has seen every transition queued
// before the call, or ctx is done.
func (p *Processor) ForceFlush(ctx context.Context) error {
	if !p.async {
		return nil
	}
	flushed := make(chan struct{})
	p.queueMu.RLock()
	if p.closed {
		p.queueMu.RUnlock()
		return nil
	}
	select {
	case p.queue <- queued{flush: flushed}:
		p.queueMu.RUnlock()
	case <-ctx.Done():
		p.queueMu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops the ticker, delivers the queued transitions to the
// callback and stops its goroutine; after it, OnEnd and Tick do nothing.
// It returns ctx.Err() if ctx ends first (the callback goroutine then
// still finishes the queue). Registered contexts are left as they are.
func (p *Processor) Shutdown(ctx context.Context) error {
	p.shutdown.Do(func() {
		p.isDown.Store(true)
		close(p.stop)
		// Wait for a running Tick: taking the lock is the wait.
		p.tickMu.Lock()
		p.tickMu.Unlock() //nolint:staticcheck // SA2001: the empty section is the wait

		if p.async {
			p.queueMu.Lock()
			p.closed = true
			close(p.queue)
			p.queueMu.Unlock()
		}
	})
	finished := make(chan struct{})
	go func() { p.done.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the processor's and its engine's counters.
func (p *Processor) Stats() Stats {
	es := p.eng.Stats()
	return Stats{
		Spans:             p.spans.Load(),
		ToolCalls:         p.calls.Load(),
		Malformed:         p.malformed.Load(),
		Oversized:         p.oversized.Load(),
		BadEvidence:       p.badEvidence.Load(),
		Transitions:       p.transitions.Load(),
		Kills:             p.kills.Load(),
		DryRunKills:       p.dryRunKills.Load(),
		ContextsCancelled: p.cancelled.Load(),
		CallbacksDropped:  p.dropped.Load(),
		Warnings:          p.warns.Load(),
		Sessions:          es.Sessions.Load(),
		Evicted:           es.Evicted.Load(),
		Expired:           es.Expired.Load(),
		Duplicates:        es.Duplicates.Load(),
		OutOfOrder:        es.OutOfOrder.Load(),
	}
}

// Session reports a tracked session's state and reason.
func (p *Processor) Session(key string) (engine.State, engine.Reason, bool) {
	return p.eng.Session(key)
}
