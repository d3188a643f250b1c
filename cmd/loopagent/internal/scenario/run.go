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
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Model == "" {
		o.Model = defaultModel
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	sleep := o.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / o.Speed) }
	flush := func() {
		if o.Flush == nil {
			return
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = o.Flush(fctx) // export errors are reported by the SDK's error handler
	}

	tracer := tp.Tracer(TracerName)
	common := []attribute.KeyValue{attribute.String(AttrProviderName, defaultProvider)}
	if o.SessionID != "" {
		common = append(common, attribute.String(AttrConversationID, o.SessionID))
	}
	start := now()
	rootCtx, root := tracer.Start(ctx, OperationInvokeAgent+" "+s.Agent,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start),
		trace.WithAttributes(common...),
		trace.WithAttributes(
			attribute.String(AttrOperationName, OperationInvokeAgent),
			attribute.String(AttrAgentName, s.Agent),
			attribute.String(AttrAgentID, "agent-"+s.Agent),
			attribute.String(AttrRequestModel, o.Model),
		))
	// Spans are created under a context that is not cancelled by the kill,
	// so the last span still carries its parent when the run stops.
	spanCtx := context.WithoutCancel(rootCtx)
	res := Result{Scenario: s.Name, Agent: s.Agent, SessionID: o.SessionID,
		TraceID: root.SpanContext().TraceID().String()}
	idPrefix := "call_" + res.TraceID[:12]

	var prevStart time.Time
	finish := func(stop string) (Result, error) {
		res.Stop = stop
		end := now()
		if stop == "canceled" {
			root.SetStatus(codes.Error, "agent terminated")
			root.SetAttributes(attribute.String(AttrErrorType, "terminated"))
		}
		root.End(trace.WithTimestamp(end))
		flush()
		res.Elapsed = end.Sub(start)
		return res, nil
	}

	for i := 0; ; i++ {
		if o.MaxCalls > 0 && i >= o.MaxCalls {
			return finish("max_calls")
		}
		c, ok := s.Next(i)
		if !ok {
			return finish("finished")
		}
		// Wait until the call's start time (scenario gap, start to start).
		target := now()
		if !prevStart.IsZero() {
			target = prevStart.Add(scale(c.Gap))
		}
		if d := target.Sub(now()); d > 0 {
			if err := sleep(ctx, d); err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return finish("canceled")
				}
				return res, err
			}
		} else if ctx.Err() != nil {
			return finish("canceled")
		}
		callStart := now()

		// The model turn that chose this call: a chat span that ended just
		// before the tool started.
		if !c.NoChat {
			chatDur := scale(defaultChatDuration)
			if !prevStart.IsZero() {
				chatDur = min(chatDur, scale(c.Gap)*8/10)
			}
			if chatDur >= time.Millisecond {
				chatEnd := callStart.Add(-time.Millisecond)
				_, chat := tracer.Start(spanCtx, OperationChat+" "+o.Model,
					trace.WithSpanKind(trace.SpanKindClient),
					trace.WithTimestamp(chatEnd.Add(-chatDur)),
					trace.WithAttributes(common...),
					trace.WithAttributes(
						attribute.String(AttrOperationName, OperationChat),
						attribute.String(AttrRequestModel, o.Model),
						attribute.Int(AttrInputTokens, 1200+37*i),
						attribute.Int(AttrOutputTokens, 40+len(c.Args)/4),
					))
				chat.End(trace.WithTimestamp(chatEnd))
			}
		}

		callID := fmt.Sprintf("%s_%04d", idPrefix, i+1)
		attrs := append([]attribute.KeyValue{}, common...)
		attrs = append(attrs,
			attribute.String(AttrOperationName, OperationExecuteTool),
			attribute.String(AttrToolName, c.Tool),
			attribute.String(AttrToolType, "function"),
			attribute.String(AttrToolCallID, callID),
		)
		if !o.NoContent {
			attrs = append(attrs, attribute.String(AttrToolCallArgs, c.Args))
			if c.Result != "" || c.ErrorType == "" {
				attrs = append(attrs, attribute.String(AttrToolCallResult, c.Result))
			}
		}
		if !o.NoEvidence {
			attrs = append(attrs, evidenceAttrs(c, callStart, o.Speed)...)
		}
		if c.ErrorType != "" {
			attrs = append(attrs, attribute.String(AttrErrorType, c.ErrorType))
		}
		_, span := tracer.Start(spanCtx, OperationExecuteTool+" "+c.Tool,
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(callStart),
			trace.WithAttributes(attrs...))
		dur := c.Duration
		if dur == 0 {
			dur = defaultToolDuration
		}
		// The tool runs; a kill during the tool still ends the span.
		canceled := sleep(ctx, scale(dur)) != nil
		if c.ErrorType != "" {
			span.SetStatus(codes.Error, c.ErrorMessage)
			res.Errors++
		}
		span.End(trace.WithTimestamp(now()))
		res.Calls++
		prevStart = callStart
		flush()
		if o.OnCall != nil {
			o.OnCall(CallInfo{Index: i + 1, Call: c, CallID: callID, TraceID: res.TraceID,
				SpanID: span.SpanContext().SpanID().String(), Start: callStart})
		}
		if canceled {
			return finish("canceled")
		}
	}
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
