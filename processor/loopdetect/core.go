package loopdetect

import (
	"context"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// The detector core: one walk over a batch of either signal. A signal
// adapter (traces.go, logs.go) knows its batch's shape — resources, scopes,
// records — and how a verdict is written into it, and screens each scope's
// records itself (see signal.scope); for every record, in this order: strip
// a forged verdict, advance the event clock, and for a possible tool call
// readCall extracts it, resolves its session, observes it and counts; then
// the batch is forwarded, a failed forward keeps its transitions pending,
// and in event_time mode the timers run. Walk and forward are one call, as
// in the tail-sampling processor: the batch's transitions are at hand when
// the next consumer answers, with no table of batches in flight.

// signal is one signal's side of the walk: B is its batch, L a scope's
// record list.
type signal[B any, L any] interface {
	resources(b B) int
	// scopes returns resource i's attributes and scope count.
	scopes(b B, i int) (res pcommon.Map, n int)
	// records returns scope j of resource i and its record count.
	records(b B, i, j int) (L, int)
	// scope reads scope l's records, resource attributes res, and
	// reports whether it met forged verdicts. The loop over records is the
	// adapter's, not the core's: most records are not tool calls, and a
	// loop over a concrete type reads them with static calls only, where
	// the core would make two calls through this interface per record.
	// A record that may be a tool call goes to readCall.
	scope(w *walk, l L, res pcommon.Map) (forged bool)
	// endScope removes the scope's forged verdicts (when forged) and
	// writes the transitions emit left pending.
	endScope(w *walk, l L, forged bool)
	// timerBatch builds a batch of timer-driven transitions.
	timerBatch(trans []engine.Transition) B
}

// walk is one batch's pass: the batch's state and counts, and the
// transition events of the scope being read (logs write them at the
// scope's end).
type walk struct {
	ctx      context.Context
	detector *detector
	state    *batchState
	counts   batchCounts
	pending  []loopevent.Event
}

// side is the detector's state for one signal: its adapter and every
// pipeline's output (timer-driven transitions go to each).
type side[B any, L any] struct {
	d   *detector
	sig signal[B, L]

	outMu  sync.Mutex
	outs   []func(context.Context, B) error
	logger *zap.Logger // the first pipeline's
}

func newSide[B any, L any](d *detector, sig signal[B, L]) *side[B, L] {
	return &side[B, L]{d: d, sig: sig}
}

// consume walks b and forwards it to next. If next fails, the batch's
// transitions are kept pending (a kill is never lost to a full queue
// downstream) and its error returned; else the event-time timers run.
func (s *side[B, L]) consume(ctx context.Context, b B, next func(context.Context, B) error) error {
	d := s.d
	st := d.pool.Get().(*batchState)
	// The walk lives in the pooled state: handed to the adapter's methods,
	// one on the stack would escape, an allocation per batch.
	w := &st.walk
	*w = walk{ctx: ctx, detector: d, state: st, pending: w.pending[:0]}
	s.walk(w, b)
	d.flushTokens(st)
	d.countBatch(ctx, w.counts)
	if w.counts.noSession > 0 {
		d.logger.Debug("Tool calls without a session key or trace context were skipped",
			zap.Int64("records", w.counts.noSession))
	}
	d.reportStats(ctx)
	err := next(ctx, b)
	if err != nil {
		d.keepPending(st.batch)
	}
	d.release(st)
	if err != nil {
		return err
	}
	return d.eventTimeTick(ctx)
}

// walk reads every record of b.
func (s *side[B, L]) walk(w *walk, b B) {
	for i := range s.sig.resources(b) {
		res, scopes := s.sig.scopes(b, i)
		w.state.sc.ShareResource()
		for j := range scopes {
			l, n := s.sig.records(b, i, j)
			w.counts.items += int64(n)
			w.pending = w.pending[:0]
			forged := s.sig.scope(w, l, res)
			s.sig.endScope(w, l, forged)
		}
	}
}

// callResult is what readCall made of a record.
type callResult uint8

const (
	// notCall: not a tool call after all; a span's usage is read instead.
	notCall callResult = iota
	// callSkipped: a tool call without a session; nothing to write.
	callSkipped
	// callObserved: observed; the adapter writes w.st.trans, if any.
	callObserved
)

// readCall extracts and observes a record the adapter screened as a
// possible tool call; declared is the prefilter's word that it is one, so
// extract need not look it up again. A generic function rather than an
// adapter method so both signals share it; it runs for tool calls only,
// where the extraction dwarfs the call.
func readCall[R extract.Span](w *walk, x *extract.Extractor, rec R, declared bool) callResult {
	d, st := w.detector, w.state
	d.forgetTrace(st)
	var ok bool
	var out extract.Outcome
	if declared {
		ok, out = extract.ExtractDeclared(x, rec, &st.sc, &st.call)
	} else {
		ok, out = extract.Extract(x, rec, &st.sc, &st.call)
	}
	if !ok {
		return notCall
	}
	if noSessionKey(&st.call) {
		w.counts.noSession++
		return callSkipped
	}
	d.observe(w.ctx, st, out, &w.counts)
	return callObserved
}

// addOutput registers a pipeline's output for timer-driven transitions.
func (s *side[B, L]) addOutput(next func(context.Context, B) error, logger *zap.Logger) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.outs = append(s.outs, next)
	if s.logger == nil {
		s.logger = logger
	}
}

func (s *side[B, L]) hasOutputs() bool {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return len(s.outs) > 0
}

// deliver sends timer-driven transitions to every pipeline's output, each
// its own batch; they are kept pending if any output fails (their event
// ids are stable, so an output that had them recognises the repetition).
func (s *side[B, L]) deliver(ctx context.Context, trans []engine.Transition) error {
	if len(trans) == 0 {
		return nil
	}
	s.outMu.Lock()
	outs := slices.Clone(s.outs)
	s.outMu.Unlock()
	var err error
	for _, out := range outs {
		if e := out(ctx, s.sig.timerBatch(trans)); e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		s.d.keepPending(trans)
	}
	return err
}

// firstLogger is the logger of the signal's first pipeline.
func (s *side[B, L]) firstLogger() *zap.Logger {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.logger
}
