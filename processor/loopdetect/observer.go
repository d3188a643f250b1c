package loopdetect

import (
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// Observation is one tool call as the processor read it, reported to the
// function set with ObserveCalls after the engine has seen it. Offline
// audits (loopreplay) use it to show every call, not only the calls that
// changed a session's state.
type Observation struct {
	// Session is the session key and SessionSource the attribute it came
	// from ("trace_id" when none matched).
	Session       string
	SessionSource string
	// Client is the recognised client shape, Tool the tool name.
	Client string
	Tool   string
	// TraceID and SpanID identify the span or log record (a log record's
	// span id is derived from its content, as transitions report it).
	TraceID [16]byte
	SpanID  [8]byte
	// Start and End are the call's times.
	Start, End time.Time
	// Signature digests the action (tool and canonical arguments) and
	// Fingerprint the result; both unkeyed, for grouping equal calls only.
	Signature   engine.Digest
	Fingerprint engine.Digest
	// NameOnly: no arguments were recorded, so the signature is the tool
	// name alone (low confidence).
	NameOnly bool
	// Failed marks an errored call.
	Failed bool
	// Counted is false when the engine took the call for another delivery
	// of a call it had already counted (a duplicate or a nested twin).
	Counted bool
	// Transitions are the state changes this call caused.
	Transitions []engine.Transition
}

// ObserveCalls makes every loop_detect component created from cfg call fn
// for each tool call it reads, on the consuming goroutine, before the
// batch is forwarded. fn must not keep the Observation: its strings and
// slices are reused. It is meant for offline replay; Counted is exact only
// when calls are consumed one batch at a time.
func ObserveCalls(cfg *Config, fn func(*Observation)) {
	cfg.observer = fn
}

// observeWithHook is observe's engine step with the observer reporting.
func (d *detector) observeWithHook(st *batchState) {
	dups := d.eng.Stats().Duplicates.Load()
	st.trans = d.eng.Observe(&st.call, d.batchNow(st), st.trans[:0])
	c := &st.call
	d.cfg.observer(&Observation{
		Session: c.Session, SessionSource: c.SessionSource, Client: c.Client, Tool: c.Tool,
		TraceID: c.TraceID, SpanID: c.SpanID, Start: c.Start, End: c.End,
		Signature: c.Signature, Fingerprint: c.Fingerprint, NameOnly: c.LowConfidence(), Failed: c.Failed,
		Counted:     d.eng.Stats().Duplicates.Load() == dups,
		Transitions: st.trans,
	})
}
