// Package adkgo_test runs sdkprocessor inside a real Google ADK Go agent
// (runner, LLM agent, function tool, in-memory sessions) with a scripted
// model: no network, no API key.
package adkgo_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/telemetry"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
	"google.golang.org/genai"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor"
)

// ADK Go builds its tracer provider once per process, from the span
// processors registered before its first span, so the whole package shares
// one Processor, as an agent process would; each test is its own session.
var (
	proc *sdkprocessor.Processor
	seen = &transitions{by: make(map[string][]engine.Transition)}
)

func TestMain(m *testing.M) {
	var err error
	// A synchronous callback and no ticker: every transition is recorded
	// before span.End returns, and no goroutine outlives the tests.
	proc, err = sdkprocessor.New(
		sdkprocessor.WithCallback(seen.add),
		sdkprocessor.WithCallbackQueue(0),
		sdkprocessor.WithTickInterval(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	telemetry.RegisterSpanProcessor(proc)
	code := m.Run()
	if err := proc.Shutdown(context.Background()); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// transitions records the callback's transitions per session.
type transitions struct {
	mu sync.Mutex
	by map[string][]engine.Transition
}

func (ts *transitions) add(t engine.Transition) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.by[t.Session] = append(ts.by[t.Session], t)
}

// summary lists a session's transitions as "from->to reason #call kill".
func (ts *transitions) summary(session string) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for _, t := range ts.by[session] {
		out = append(out, fmt.Sprintf("%s->%s %s #%d kill=%v", t.From, t.To, t.Reason, t.CallIndex, t.Kill))
	}
	return out
}

func (ts *transitions) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, t := range ts.by {
		n += len(t)
	}
	return n
}

// scriptedModel is a model.LLM that asks for the function call turn(n)
// returns on its n-th call, or answers in text when turn returns nil. Like
// a real model client, it fails on a cancelled context; it reports the
// context's cause, so a kill surfaces as the run's error.
type scriptedModel struct {
	turn  func(n int) *genai.FunctionCall
	calls atomic.Int64
}

func (m *scriptedModel) Name() string { return "scripted" }

func (m *scriptedModel) GenerateContent(ctx context.Context, _ *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		n := int(m.calls.Add(1))
		if ctx.Err() != nil {
			yield(nil, fmt.Errorf("scripted model: %w", context.Cause(ctx)))
			return
		}
		content := genai.NewContentFromText("All issues are triaged.", genai.RoleModel)
		if fc := m.turn(n); fc != nil {
			// No call id: ADK assigns one ("adk-<uuid>"), as with Gemini.
			content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: fc}}}
		}
		yield(&model.LLMResponse{Content: content, TurnComplete: true}, nil)
	}
}

type listArgs struct {
	Repo string `json:"repo"`
	Page int    `json:"page"`
}

type listResult struct {
	Open []int `json:"open"`
}

// maxTurns bounds a loop the processor fails to stop.
const maxTurns = 50

// loopTurn asks for the same call every time, and the tool answers the
// same: the 1,972-call incident's shape.
func loopTurn(n int) *genai.FunctionCall {
	if n > maxTurns {
		return nil
	}
	return &genai.FunctionCall{Name: "list_issues", Args: map[string]any{"repo": "acme/app", "page": 1}}
}

// healthyTurn pages through 8 pages, then answers.
func healthyTurn(n int) *genai.FunctionCall {
	if n > 8 {
		return nil
	}
	return &genai.FunctionCall{Name: "list_issues", Args: map[string]any{"repo": "acme/app", "page": n}}
}

// run is one ADK Go run: a user message to an LLM agent with one function
// tool, under ctx. It returns how many times the tool ran and the first
// error the runner yielded.
func run(t *testing.T, ctx context.Context, turn func(int) *genai.FunctionCall) (toolRuns int, err error) {
	t.Helper()
	listIssues, err := functiontool.New(functiontool.Config{Name: "list_issues", Description: "Lists a repository's open issues."},
		func(_ tool.Context, a listArgs) (listResult, error) {
			toolRuns++
			return listResult{Open: []int{a.Page*10 + 2, a.Page*10 + 5}}, nil
		})
	require.NoError(t, err)
	a, err := llmagent.New(llmagent.Config{
		Name:        "triage",
		Description: "Triages open issues.",
		Instruction: "List the open issues and triage them.",
		Model:       &scriptedModel{turn: turn},
		Tools:       []tool.Tool{listIssues},
	})
	require.NoError(t, err)
	sessions := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: "triage", Agent: a, SessionService: sessions})
	require.NoError(t, err)
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "triage", UserID: "dev"})
	require.NoError(t, err)

	msg := genai.NewContentFromText("Triage the open issues of acme/app.", genai.RoleUser)
	for _, runErr := range r.Run(ctx, "dev", created.Session.ID(), msg, agent.RunConfig{}) {
		if runErr != nil {
			return toolRuns, runErr
		}
	}
	return toolRuns, nil
}

// TestADKRun: a looping ADK Go agent is stuck at its 2nd call and killed at
// its 5th, and runner.Run stops there; a healthy one is left alone. Without
// StartRun nothing is seen: ADK Go starts no span around a run, so each of
// its spans is a trace, and a session, of its own.
func TestADKRun(t *testing.T) {
	killed := []string{
		"working->stuck unchanged_result #2 kill=false",
		"stuck->stuck frequent_identical #5 kill=true",
	}
	tests := []struct {
		name           string
		turn           func(int) *genai.FunctionCall
		startRun       bool
		wantToolRuns   int
		wantKill       bool
		wantTransition []string
	}{
		{"a loop is killed at the 5th call", loopTurn, true, 5, true, killed},
		{"a healthy run of 8 different calls", healthyTurn, true, 8, false, nil},
		{"without StartRun a loop runs to the end", loopTurn, false, maxTurns, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := seen.count()
			ctx, end := context.Background(), func() {}
			if tt.startRun {
				// The global provider is unset: StartRun gives the run a
				// fresh trace id that ADK's spans inherit.
				ctx, end = proc.StartRun(ctx, nil, "")
			}
			toolRuns, err := run(t, ctx, tt.turn)
			end()

			assert.Equal(t, tt.wantToolRuns, toolRuns)
			if !tt.wantKill {
				require.NoError(t, err)
				assert.Equal(t, before, seen.count(), "no session changed state")
				return
			}
			require.ErrorIs(t, err, sdkprocessor.ErrKilled, "the model call after the kill fails with the kill cause")
			var kill *sdkprocessor.KillError
			require.ErrorAs(t, context.Cause(ctx), &kill)
			assert.Equal(t, engine.ReasonFrequentIdentical, kill.Transition.Reason)
			session := trace.SpanContextFromContext(ctx).TraceID().String()
			assert.Equal(t, session, kill.Transition.Session)
			assert.Equal(t, tt.wantTransition, seen.summary(session))
			assert.Equal(t, "google_adk", kill.Transition.Client)
		})
	}
}

// TestADKTwinSpansAreOneCall: registered on ADK's provider and on the
// global one, the processor sees every ADK span twice (ADK starts each on
// both), with the same call id and sub-millisecond tools. The twins merge:
// still one kill, at the 5th real call.
func TestADKTwinSpansAreOneCall(t *testing.T) {
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc)))
	// Not shut down: that would shut the shared processor down.
	defer otel.SetTracerProvider(nooptrace.NewTracerProvider())
	st := proc.Stats()

	ctx, end := proc.StartRun(context.Background(), nil, "") // on the global provider
	toolRuns, err := run(t, ctx, loopTurn)
	end()

	assert.Equal(t, 5, toolRuns)
	require.ErrorIs(t, err, sdkprocessor.ErrKilled)
	after := proc.Stats()
	assert.Equal(t, int64(10), after.ToolCalls-st.ToolCalls, "each of the 5 calls was seen twice")
	assert.Equal(t, int64(5), after.Duplicates-st.Duplicates, "each twin merged")
	assert.Equal(t, int64(1), after.Kills-st.Kills)
	session := trace.SpanContextFromContext(ctx).TraceID().String()
	assert.Equal(t, []string{
		"working->stuck unchanged_result #2 kill=false",
		"stuck->stuck frequent_identical #5 kill=true",
	}, seen.summary(session))
	assert.True(t, errors.Is(context.Cause(ctx), sdkprocessor.ErrKilled))
}
