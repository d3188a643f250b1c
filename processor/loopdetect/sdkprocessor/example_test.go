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
	defer tp.Shutdown(context.Background())
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
