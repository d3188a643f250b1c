package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the simulated agent's spans.
const TracerName = "github.com/otelcol-loop/otelcol-loop/cmd/loopagent"

// Options tune a run.
type Options struct {
	// Speed divides every scenario gap and duration (time compression).
	// Values <= 0 mean 1 (real time). Span timestamps are always real.
	Speed float64
	// MaxCalls caps the number of tool calls (0: no cap).
	MaxCalls int
	// SessionID, when set, is written as gen_ai.conversation.id on every span.
	SessionID string
	// NoEvidence leaves out the loopdetect.* evidence attributes.
	NoEvidence bool
	// NoContent leaves out tool arguments and results (content capture off).
	NoContent bool
	// Model is gen_ai.request.model of the chat spans.
	Model string
	// Flush is called after each tool call so the collector sees it at once
	// (typically the tracer provider's ForceFlush).
	Flush func(context.Context) error
	// OnCall is called after each tool span ended (for progress logging).
	OnCall func(CallInfo)
	// Now and Sleep are the clock; nil means the real clock.
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
}

// CallInfo describes one emitted tool call.
type CallInfo struct {
	Index   int // 1-based
	Call    Call
	CallID  string
	TraceID string
	SpanID  string
	Start   time.Time
}

// Result summarises a run.
type Result struct {
	Scenario  string
	Agent     string
	Calls     int
	Errors    int
	Stop      string // "finished", "max_calls" or "canceled"
	TraceID   string
	SessionID string
	Elapsed   time.Duration
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run plays scenario s with tracer provider tp until the scenario finishes,
// the call cap is reached, or ctx is cancelled. Cancellation is not an
// error: the result's Stop is "canceled" and the invoke_agent span ends with
// an error status.
func Run(ctx context.Context, tp trace.TracerProvider, s Scenario, o Options) (Result, error) {
	p := newPlayer(ctx, tp, s, o)
	for i := 0; ; i++ {
		if p.o.MaxCalls > 0 && i >= p.o.MaxCalls {
			return p.finish("max_calls")
		}
		c, ok := s.Next(i)
		if !ok {
			return p.finish("finished")
		}
		if stop, err := p.waitForCall(c); stop != "" || err != nil {
			if err != nil {
				return p.res, err
			}
			return p.finish(stop)
		}
		callStart := p.now()
		if !c.NoChat {
			p.emitChat(i, c, callStart)
		}
		if canceled := p.emitToolCall(i, c, callStart); canceled {
			return p.finish("canceled")
		}
	}
}

// player is one run of a scenario: its options with defaults filled in,
// the clock, the invoke_agent span and the result so far.
type player struct {
	ctx    context.Context
	o      Options
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	tracer trace.Tracer
	common []attribute.KeyValue
	root   trace.Span
	// spanCtx parents every span: it is not cancelled by the kill, so the
	// last span still carries its parent when the run stops.
	spanCtx   context.Context
	res       Result
	idPrefix  string
	start     time.Time
	prevStart time.Time
}

// newPlayer fills in o's defaults and starts the invoke_agent span.
func newPlayer(ctx context.Context, tp trace.TracerProvider, s Scenario, o Options) *player {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Model == "" {
		o.Model = defaultModel
	}
	p := &player{ctx: ctx, o: o, now: o.Now, sleep: o.Sleep, tracer: tp.Tracer(TracerName)}
	if p.now == nil {
		p.now = time.Now
	}
	if p.sleep == nil {
		p.sleep = sleepCtx
	}
	p.common = []attribute.KeyValue{attribute.String(AttrProviderName, defaultProvider)}
	if o.SessionID != "" {
		p.common = append(p.common, attribute.String(AttrConversationID, o.SessionID))
	}
	p.start = p.now()
	rootCtx, root := p.tracer.Start(ctx, OperationInvokeAgent+" "+s.Agent,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(p.start),
		trace.WithAttributes(p.common...),
		trace.WithAttributes(
			attribute.String(AttrOperationName, OperationInvokeAgent),
			attribute.String(AttrAgentName, s.Agent),
			attribute.String(AttrAgentID, "agent-"+s.Agent),
			attribute.String(AttrRequestModel, o.Model),
		))
	p.root = root
	p.spanCtx = context.WithoutCancel(rootCtx)
	p.res = Result{Scenario: s.Name, Agent: s.Agent, SessionID: o.SessionID,
		TraceID: root.SpanContext().TraceID().String()}
	p.idPrefix = "call_" + p.res.TraceID[:12]
	return p
}

// scale compresses a scenario duration by the run's speed.
func (p *player) scale(d time.Duration) time.Duration { return time.Duration(float64(d) / p.o.Speed) }

// flush hands the ended spans to the exporter, for at most 5 seconds.
func (p *player) flush() {
	if p.o.Flush == nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 5*time.Second)
	defer cancel()
	_ = p.o.Flush(fctx) // export errors are reported by the SDK's error handler
}

// finish ends the invoke_agent span (with an error status when canceled),
// flushes and returns the result.
func (p *player) finish(stop string) (Result, error) {
	p.res.Stop = stop
	end := p.now()
	if stop == "canceled" {
		p.root.SetStatus(codes.Error, "agent terminated")
		p.root.SetAttributes(attribute.String(AttrErrorType, "terminated"))
	}
	p.root.End(trace.WithTimestamp(end))
	p.flush()
	p.res.Elapsed = end.Sub(p.start)
	return p.res, nil
}

// waitForCall waits until the call's start time (scenario gap, start to
// start). stop is "canceled" when the run was canceled meanwhile; err is a
// failure of the clock.
func (p *player) waitForCall(c Call) (stop string, err error) {
	target := p.now()
	if !p.prevStart.IsZero() {
		target = p.prevStart.Add(p.scale(c.Gap))
	}
	if d := target.Sub(p.now()); d > 0 {
		if err := p.sleep(p.ctx, d); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return "canceled", nil
			}
			return "", err
		}
	} else if p.ctx.Err() != nil {
		return "canceled", nil
	}
	return "", nil
}

// emitChat writes the model turn that chose call i: a chat span that ended
// just before the tool started.
func (p *player) emitChat(i int, c Call, callStart time.Time) {
	chatDur := p.scale(defaultChatDuration)
	if !p.prevStart.IsZero() {
		chatDur = min(chatDur, p.scale(c.Gap)*8/10)
	}
	if chatDur < time.Millisecond {
		return
	}
	chatEnd := callStart.Add(-time.Millisecond)
	_, chat := p.tracer.Start(p.spanCtx, OperationChat+" "+p.o.Model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(chatEnd.Add(-chatDur)),
		trace.WithAttributes(p.common...),
		trace.WithAttributes(
			attribute.String(AttrOperationName, OperationChat),
			attribute.String(AttrRequestModel, p.o.Model),
			attribute.Int(AttrInputTokens, 1200+37*i),
			attribute.Int(AttrOutputTokens, 40+len(c.Args)/4),
		))
	chat.End(trace.WithTimestamp(chatEnd))
}

// emitToolCall writes call i's execute_tool span, waits out the tool's
// duration and reports whether the run was canceled meanwhile.
func (p *player) emitToolCall(i int, c Call, callStart time.Time) (canceled bool) {
	callID := fmt.Sprintf("%s_%04d", p.idPrefix, i+1)
	_, span := p.tracer.Start(p.spanCtx, OperationExecuteTool+" "+c.Tool,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(callStart),
		trace.WithAttributes(p.toolAttrs(c, callID, callStart)...))
	dur := c.Duration
	if dur == 0 {
		dur = defaultToolDuration
	}
	// The tool runs; a kill during the tool still ends the span.
	canceled = p.sleep(p.ctx, p.scale(dur)) != nil
	if c.ErrorType != "" {
		span.SetStatus(codes.Error, c.ErrorMessage)
		p.res.Errors++
	}
	span.End(trace.WithTimestamp(p.now()))
	p.res.Calls++
	p.prevStart = callStart
	p.flush()
	if p.o.OnCall != nil {
		p.o.OnCall(CallInfo{Index: i + 1, Call: c, CallID: callID, TraceID: p.res.TraceID,
			SpanID: span.SpanContext().SpanID().String(), Start: callStart})
	}
	return canceled
}

// toolAttrs are the attributes of a tool call's span: the common ones, the
// tool, its content unless left out, its evidence and its error.
func (p *player) toolAttrs(c Call, callID string, callStart time.Time) []attribute.KeyValue {
	attrs := append([]attribute.KeyValue{}, p.common...)
	attrs = append(attrs,
		attribute.String(AttrOperationName, OperationExecuteTool),
		attribute.String(AttrToolName, c.Tool),
		attribute.String(AttrToolType, "function"),
		attribute.String(AttrToolCallID, callID),
	)
	if !p.o.NoContent {
		attrs = append(attrs, attribute.String(AttrToolCallArgs, c.Args))
		if c.Result != "" || c.ErrorType == "" {
			attrs = append(attrs, attribute.String(AttrToolCallResult, c.Result))
		}
	}
	if !p.o.NoEvidence {
		attrs = append(attrs, evidenceAttrs(c, callStart, p.o.Speed)...)
	}
	if c.ErrorType != "" {
		attrs = append(attrs, attribute.String(AttrErrorType, c.ErrorType))
	}
	return attrs
}

// evidenceAttrs writes the call's evidence. Under time compression the
// retry policy's initial interval is compressed too (the agent's retrier
// really waits gap/speed), so the declared policy matches the observed gaps.
func evidenceAttrs(c Call, callStart time.Time, speed float64) []attribute.KeyValue {
	var a []attribute.KeyValue
	if c.Fingerprint != "" {
		a = append(a, attribute.String(AttrProgressFingerprint, c.Fingerprint))
	}
	if c.Retry != nil {
		a = append(a,
			attribute.Int(AttrRetryAttempt, c.Retry.Attempt),
			attribute.Float64(AttrRetryInitialInterval, c.Retry.InitialIntervalSecs/speed),
			attribute.Float64(AttrRetryBackoffRate, c.Retry.BackoffRate),
			attribute.Int(AttrRetryMaxAttempts, c.Retry.MaxAttempts),
		)
	}
	if c.Wait != nil {
		a = append(a,
			attribute.String(AttrWaitOwner, c.Wait.Owner),
			attribute.String(AttrWaitDeadline, callStart.Add(c.Wait.DeadlineIn).UTC().Format(time.RFC3339)),
		)
		if c.Wait.Reason != "" {
			a = append(a, attribute.String(AttrWaitReason, c.Wait.Reason))
		}
	}
	return a
}
