package sdkprocessor_test

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor"
)

// An agent that keeps running the same tool call is stopped: its run
// context is cancelled with the kill's explanation as the cause.
func Example() {
	p, _ := sdkprocessor.New(sdkprocessor.WithCallback(func(t engine.Transition) {
		fmt.Printf("%s -> %s (%s) kill=%v\n", t.From, t.To, t.Reason, t.Kill)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tp.Tracer("my-agent")

	// One run = one trace = one session; ctx is cancelled on a kill.
	ctx, end := p.StartRun(context.Background(), tp, "invoke_agent")
	for ctx.Err() == nil { // the agent's loop: same call, same answer
		_, s := tracer.Start(ctx, "execute_tool bash", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "bash"),
			attribute.String("gen_ai.tool.call.arguments", `{"command": "gh issue list"}`),
			attribute.String("gen_ai.tool.call.result", "12\n15\n31\n")))
		s.End()
	}
	end()
	_ = tp.ForceFlush(context.Background()) // deliver queued callbacks
	var kill *sdkprocessor.KillError
	if errors.As(context.Cause(ctx), &kill) {
		fmt.Println("run cancelled:", kill.Transition.Explanation)
	}
	// Output:
	// working -> stuck (unchanged_result) kill=false
	// stuck -> stuck (frequent_identical) kill=true
	// run cancelled: loop detected: same tool call x5 of last 5
}

// The ladder: the agent is warned with a nudge when its session becomes
// stuck, before the kill policy stops it.
func ExampleWithWarn() {
	calls, warnedAt, nudge := 0, 0, ""
	p, _ := sdkprocessor.New(sdkprocessor.WithWarn(func(w sdkprocessor.Warning) {
		warnedAt, nudge = calls, w.Nudge // handed to the agent's next model request
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tp.Tracer("my-agent")

	ctx, run := tracer.Start(context.Background(), "invoke_agent")
	ctx, cancel := p.RegisterTrace(ctx)
	defer cancel(nil)
	for ctx.Err() == nil { // this agent ignores the nudge
		calls++
		_, s := tracer.Start(ctx, "execute_tool bash", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "bash"),
			attribute.String("gen_ai.tool.call.arguments", `{"command": "gh issue list"}`),
			attribute.String("gen_ai.tool.call.result", "12\n15\n31\n")))
		s.End()
	}
	run.End()
	fmt.Println("warned after call", warnedAt, "-", nudge)
	fmt.Println("killed after call", calls)
	// Output:
	// warned after call 2 - You called bash with the same arguments 2 times and got the same result; try a different approach.
	// killed after call 5
}
