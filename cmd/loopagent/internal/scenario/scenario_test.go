package scenario

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// fakeClock advances only when the runner sleeps, so runs are instant and
// every gap is exact.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return nil
}

type run struct {
	res    Result
	spans  []sdktrace.ReadOnlySpan
	root   sdktrace.ReadOnlySpan
	tools  []sdktrace.ReadOnlySpan
	chats  []sdktrace.ReadOnlySpan
	clock  *fakeClock
	calls  []CallInfo
	flushN int
}

func play(t *testing.T, name string, o Options) run {
	t.Helper()
	s, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	r := run{clock: newFakeClock()}
	o.Now, o.Sleep = r.clock.Now, r.clock.Sleep
	o.Flush = func(context.Context) error { r.flushN++; return nil }
	o.OnCall = func(ci CallInfo) { r.calls = append(r.calls, ci) }
	r.res, err = Run(context.Background(), tp, s, o)
	if err != nil {
		t.Fatal(err)
	}
	r.spans = sr.Ended()
	for _, sp := range r.spans {
		switch attr(sp, AttrOperationName) {
		case OperationInvokeAgent:
			if r.root != nil {
				t.Fatalf("two invoke_agent spans")
			}
			r.root = sp
		case OperationExecuteTool:
			r.tools = append(r.tools, sp)
		case OperationChat:
			r.chats = append(r.chats, sp)
		default:
			t.Fatalf("span %q without a known gen_ai.operation.name", sp.Name())
		}
	}
	if r.root == nil {
		t.Fatalf("no invoke_agent span")
	}
	checkCommon(t, r, s)
	return r
}

func attrValue(sp sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	v, _ := attrValue(sp, key)
	return v.AsString()
}

func has(sp sdktrace.ReadOnlySpan, key string) bool {
	_, ok := attrValue(sp, key)
	return ok
}

// checkCommon holds for every scenario: the span tree, the semconv
// attributes, unique call ids, valid JSON arguments, one flush per call.
func checkCommon(t *testing.T, r run, s Scenario) {
	t.Helper()
	root := r.root
	if root.Name() != "invoke_agent "+s.Agent || attr(root, AttrAgentName) != s.Agent {
		t.Errorf("root span %q agent %q", root.Name(), attr(root, AttrAgentName))
	}
	if root.Parent().IsValid() {
		t.Errorf("invoke_agent has a parent")
	}
	if len(r.tools) != r.res.Calls || len(r.calls) != r.res.Calls {
		t.Errorf("tool spans %d, OnCall %d, result calls %d", len(r.tools), len(r.calls), r.res.Calls)
	}
	if r.flushN < r.res.Calls {
		t.Errorf("flushed %d times for %d calls", r.flushN, r.res.Calls)
	}
	ids := map[string]bool{}
	for i, sp := range r.tools {
		tool := attr(sp, AttrToolName)
		if tool == "" || sp.Name() != "execute_tool "+tool {
			t.Errorf("tool span %d named %q, tool %q", i, sp.Name(), tool)
		}
		if sp.Parent().SpanID() != root.SpanContext().SpanID() || sp.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("tool span %d is not a child of invoke_agent", i)
		}
		id := attr(sp, AttrToolCallID)
		if id == "" || ids[id] {
			t.Errorf("tool span %d call id %q empty or duplicate", i, id)
		}
		ids[id] = true
		if args, ok := attrValue(sp, AttrToolCallArgs); ok && !json.Valid([]byte(args.AsString())) {
			t.Errorf("tool span %d arguments are not JSON: %s", i, args.AsString())
		}
		if sp.EndTime().Before(sp.StartTime()) {
			t.Errorf("tool span %d ends before it starts", i)
		}
		if i > 0 && sp.StartTime().Before(r.tools[i-1].EndTime()) {
			t.Errorf("tool span %d overlaps the previous call", i)
		}
	}
	for _, c := range r.chats {
		if c.Parent().SpanID() != root.SpanContext().SpanID() || !strings.HasPrefix(c.Name(), "chat ") {
			t.Errorf("chat span %q misplaced", c.Name())
		}
	}
	if len(r.chats) == 0 {
		t.Errorf("no chat spans")
	}
	if r.res.TraceID != root.SpanContext().TraceID().String() {
		t.Errorf("result trace id %s, root %s", r.res.TraceID, root.SpanContext().TraceID())
	}
}

func TestAllScenariosRegistered(t *testing.T) {
	want := []string{"approval", "bash-loop", "healthy-edit-test", "oscillation", "pagination", "ratelimit", "terminal-reread"}
	if got := strings.Join(Names(), ","); got != strings.Join(want, ",") {
		t.Fatalf("scenarios %s, want %s", got, strings.Join(want, ","))
	}
	// The name the bash loop had before it was named after what it is.
	if s, err := Get("seed000"); err != nil || s.Name != "bash-loop" {
		t.Fatalf("Get(seed000) = %q, %v; want the bash-loop scenario", s.Name, err)
	}
	if _, err := Get("nope"); err == nil {
		t.Fatal("unknown scenario accepted")
	}
	for _, s := range All() {
		if s.Loops == s.Healthy {
			t.Errorf("%s: Loops=%v Healthy=%v, want exactly one", s.Name, s.Loops, s.Healthy)
		}
		r := play(t, s.Name, Options{MaxCalls: 40})
		if s.Loops && r.res.Stop != "max_calls" {
			t.Errorf("%s: looping scenario stopped %q", s.Name, r.res.Stop)
		}
		if !s.Loops && r.res.Stop != "finished" {
			t.Errorf("%s: finite scenario stopped %q", s.Name, r.res.Stop)
		}
	}
}

func TestSeed000(t *testing.T) {
	r := play(t, "seed000", Options{MaxCalls: 26})
	if r.res.Calls != 26 || r.res.Stop != "max_calls" {
		t.Fatalf("calls %d stop %s", r.res.Calls, r.res.Stop)
	}
	sig := func(i int) string { return attr(r.tools[i], AttrToolName) + " " + attr(r.tools[i], AttrToolCallArgs) }
	seen := map[string]int{}
	for i := 0; i < 16; i++ {
		seen[sig(i)]++
	}
	// The first sixteen are normal work: varied, no five identical in a row.
	for s, n := range seen {
		if n > 2 {
			t.Errorf("varied phase repeats %q %d times", s, n)
		}
	}
	want := `{"command":"gh issue list --state open | awk '{print $1}' | sort -n"}`
	for i := 16; i < 26; i++ {
		if attr(r.tools[i], AttrToolName) != "bash" || attr(r.tools[i], AttrToolCallArgs) != want {
			t.Errorf("call %d: %s", i+1, sig(i))
		}
		if attr(r.tools[i], AttrToolCallResult) != seed000LoopResult {
			t.Errorf("call %d result %q", i+1, attr(r.tools[i], AttrToolCallResult))
		}
		if r.tools[i].Status().Code == codes.Error {
			t.Errorf("call %d is an error; the 1,972-call loop has valid answers", i+1)
		}
	}
	if seen[want] != 0 {
		t.Errorf("the loop call already appears in the varied phase")
	}
	// Loop calls are 8 s apart (start to start) at speed 1.
	if g := r.tools[20].StartTime().Sub(r.tools[19].StartTime()); g != 8*time.Second {
		t.Errorf("loop gap %v", g)
	}
}

func TestSpeedCompressesGaps(t *testing.T) {
	r := play(t, "seed000", Options{MaxCalls: 20, Speed: 8})
	if g := r.tools[19].StartTime().Sub(r.tools[18].StartTime()); g != time.Second {
		t.Errorf("gap at speed 8: %v, want 1s", g)
	}
}

func TestSpeedCompressesRetryPolicy(t *testing.T) {
	r := play(t, "ratelimit", Options{Speed: 4})
	var starts []time.Time
	for _, sp := range r.tools {
		if attr(sp, AttrToolName) != "create_embedding" {
			continue
		}
		starts = append(starts, sp.StartTime())
		if v, _ := attrValue(sp, AttrRetryInitialInterval); v.AsFloat64() != 0.5 {
			t.Errorf("initial interval at speed 4: %v, want 0.5", v.AsFloat64())
		}
	}
	if g := starts[1].Sub(starts[0]); g != 500*time.Millisecond {
		t.Errorf("first retry gap at speed 4: %v", g)
	}
}

func TestOscillation(t *testing.T) {
	r := play(t, "oscillation", Options{MaxCalls: 8})
	for i, sp := range r.tools {
		want := "web_search"
		if i%2 == 1 {
			want = "read_document"
		}
		if attr(sp, AttrToolName) != want {
			t.Errorf("call %d tool %s, want %s", i+1, attr(sp, AttrToolName), want)
		}
		if i >= 2 {
			prev := r.tools[i-2]
			for _, k := range []string{AttrToolCallArgs, AttrToolCallResult, AttrProgressFingerprint} {
				if attr(sp, k) != attr(prev, k) {
					t.Errorf("call %d %s changed", i+1, k)
				}
			}
		}
	}
}

func TestPagination(t *testing.T) {
	r := play(t, "pagination", Options{})
	if r.res.Stop != "finished" {
		t.Fatalf("stop %s", r.res.Stop)
	}
	cursors := map[string]bool{}
	lastRows := 0
	pages := 0
	for _, sp := range r.tools {
		if attr(sp, AttrToolName) != "list_catalog" {
			continue
		}
		pages++
		var args struct {
			Cursor string `json:"cursor"`
		}
		var res struct {
			Accepted int `json:"accepted_rows"`
		}
		if err := json.Unmarshal([]byte(attr(sp, AttrToolCallArgs)), &args); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(attr(sp, AttrToolCallResult)), &res); err != nil {
			t.Fatal(err)
		}
		if cursors[args.Cursor] {
			t.Errorf("cursor %q repeated", args.Cursor)
		}
		cursors[args.Cursor] = true
		if res.Accepted <= lastRows {
			t.Errorf("rows did not grow: %d after %d", res.Accepted, lastRows)
		}
		lastRows = res.Accepted
	}
	if pages != 4 || lastRows != 182 {
		t.Errorf("pages %d, final rows %d; want 4 pages ending at 182", pages, lastRows)
	}
}

func TestRateLimit(t *testing.T) {
	r := play(t, "ratelimit", Options{})
	if r.res.Stop != "finished" || r.res.Errors != 3 {
		t.Fatalf("stop %s errors %d", r.res.Stop, r.res.Errors)
	}
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range r.tools {
		if attr(sp, AttrToolName) == "create_embedding" {
			attempts = append(attempts, sp)
		}
	}
	if len(attempts) != 4 {
		t.Fatalf("%d attempts", len(attempts))
	}
	for i, sp := range attempts {
		v, _ := attrValue(sp, AttrRetryAttempt)
		if v.AsInt64() != int64(i+1) {
			t.Errorf("attempt %d has retry.attempt %d", i+1, v.AsInt64())
		}
		if v, _ := attrValue(sp, AttrRetryInitialInterval); v.Type() != attribute.FLOAT64 || v.AsFloat64() != 2 {
			t.Errorf("initial interval %v", v.String())
		}
		if v, _ := attrValue(sp, AttrRetryBackoffRate); v.Type() != attribute.FLOAT64 || v.AsFloat64() != 2 {
			t.Errorf("backoff rate %v", v.String())
		}
		if v, _ := attrValue(sp, AttrRetryMaxAttempts); v.Type() != attribute.INT64 || v.AsInt64() != 5 {
			t.Errorf("max attempts %v", v.String())
		}
		failing := i < 3
		if failing != (sp.Status().Code == codes.Error) || failing != (attr(sp, AttrErrorType) == "429") {
			t.Errorf("attempt %d status %v error.type %q", i+1, sp.Status(), attr(sp, AttrErrorType))
		}
		if i > 0 {
			want := time.Duration(2<<(i-1)) * time.Second
			if g := sp.StartTime().Sub(attempts[i-1].StartTime()); g != want {
				t.Errorf("gap before attempt %d: %v, want %v", i+1, g, want)
			}
		}
	}
}

func TestApproval(t *testing.T) {
	r := play(t, "approval", Options{})
	if r.res.Stop != "finished" {
		t.Fatalf("stop %s", r.res.Stop)
	}
	leased := 0
	for _, sp := range r.tools {
		if !has(sp, AttrWaitOwner) {
			continue
		}
		leased++
		dl, err := time.Parse(time.RFC3339, attr(sp, AttrWaitDeadline))
		if err != nil {
			t.Fatal(err)
		}
		if !dl.After(sp.StartTime()) {
			t.Errorf("deadline %v not after call start %v", dl, sp.StartTime())
		}
		if attr(sp, AttrWaitOwner) == "" || attr(sp, AttrWaitReason) == "" {
			t.Errorf("lease without owner or reason")
		}
		if !strings.Contains(attr(sp, AttrToolCallResult), "pending_approval") {
			t.Errorf("leased call result %s", attr(sp, AttrToolCallResult))
		}
	}
	if leased != approvalPendingChecks {
		t.Errorf("%d leased checks", leased)
	}
	last := r.tools[len(r.tools)-1]
	if attr(last, AttrToolName) != "deploy" || !strings.Contains(attr(r.tools[len(r.tools)-2], AttrToolCallResult), "approved") {
		t.Errorf("approval did not arrive before deploy")
	}
}

func TestTerminalReread(t *testing.T) {
	r := play(t, "terminal-reread", Options{MaxCalls: 14})
	first := ""
	n := 0
	for _, sp := range r.tools {
		res := attr(sp, AttrToolCallResult)
		if !strings.Contains(res, `"state":"complete"`) {
			if first != "" {
				t.Errorf("non-terminal result after complete: %s", res)
			}
			continue
		}
		if first == "" {
			first = res
		}
		if res != first || attr(sp, AttrToolCallArgs) != `{"task_id":"task-7f3a"}` {
			t.Errorf("re-read differs: %s %s", attr(sp, AttrToolCallArgs), res)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d complete re-reads", n)
	}
}

func TestHealthyEditTest(t *testing.T) {
	r := play(t, "healthy-edit-test", Options{})
	if r.res.Stop != "finished" {
		t.Fatalf("stop %s", r.res.Stop)
	}
	results := map[string]bool{}
	fps := map[string]bool{}
	runs := 0
	for _, sp := range r.tools {
		fp := attr(sp, AttrProgressFingerprint)
		if fps[fp] {
			t.Errorf("fingerprint %q repeated", fp)
		}
		fps[fp] = true
		if attr(sp, AttrToolName) != "run_tests" {
			continue
		}
		runs++
		if results[attr(sp, AttrToolCallResult)] {
			t.Errorf("test result repeated: %s", attr(sp, AttrToolCallResult))
		}
		results[attr(sp, AttrToolCallResult)] = true
	}
	if runs != healthyEditTestCycles || !results["ok: 40 passed"] {
		t.Errorf("%d test runs, results %v", runs, results)
	}
}

func TestOptions(t *testing.T) {
	r := play(t, "ratelimit", Options{SessionID: "sess-1", NoEvidence: true, NoContent: true})
	for _, sp := range r.spans {
		if attr(sp, AttrConversationID) != "sess-1" {
			t.Errorf("span %q lacks gen_ai.conversation.id", sp.Name())
		}
		for _, kv := range sp.Attributes() {
			k := string(kv.Key)
			if strings.HasPrefix(k, "loopdetect.") || k == AttrToolCallArgs || k == AttrToolCallResult {
				t.Errorf("span %q has %s despite NoEvidence/NoContent", sp.Name(), k)
			}
		}
	}
	r = play(t, "pagination", Options{})
	for _, sp := range r.spans {
		if has(sp, AttrConversationID) {
			t.Errorf("conversation id set without SessionID")
		}
	}
}

func TestCancelEndsRoot(t *testing.T) {
	s, _ := Get("seed000")
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	ctx, cancel := context.WithCancel(context.Background())
	clock := newFakeClock()
	calls := 0
	res, err := Run(ctx, tp, s, Options{Now: clock.Now, Sleep: clock.Sleep, OnCall: func(ci CallInfo) {
		calls++
		if ci.Index == 20 {
			cancel() // the supervisor's SIGTERM
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != "canceled" || res.Calls != 20 {
		t.Fatalf("stop %s calls %d", res.Stop, res.Calls)
	}
	var root sdktrace.ReadOnlySpan
	for _, sp := range sr.Ended() {
		if attr(sp, AttrOperationName) == OperationInvokeAgent {
			root = sp
		}
	}
	if root == nil || root.Status().Code != codes.Error || attr(root, AttrErrorType) != "terminated" {
		t.Fatalf("root not ended as terminated: %v", root)
	}
}
