// Package scenario defines the named behaviours of the simulated agent
// (loopagent) and runs them against any OpenTelemetry trace.TracerProvider.
//
// A scenario is a sequence of tool calls. Each call becomes one
// `execute_tool <tool>` span (OTel GenAI semantic conventions) under a single
// `invoke_agent <agent>` parent span, preceded by a `chat <model>` span, and
// optionally carries the product's evidence attributes (loopdetect.*).
// Scenarios that model a loop repeat their last call pattern forever; the
// runner stops at Options.MaxCalls or when its context is cancelled (the
// supervisor killing the agent).
package scenario

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Attribute keys the simulated agent writes. GenAI keys follow the OTel
// semantic conventions; loopdetect.* keys are the product's evidence
// attributes (docs/clients.md).
const (
	AttrOperationName  = "gen_ai.operation.name"
	AttrAgentName      = "gen_ai.agent.name"
	AttrAgentID        = "gen_ai.agent.id"
	AttrConversationID = "gen_ai.conversation.id"
	AttrProviderName   = "gen_ai.provider.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolType       = "gen_ai.tool.type"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrToolCallArgs   = "gen_ai.tool.call.arguments"
	AttrToolCallResult = "gen_ai.tool.call.result"
	AttrErrorType      = "error.type"

	AttrProgressFingerprint    = "loopdetect.progress.fingerprint"
	AttrRetryAttempt           = "loopdetect.retry.attempt"
	AttrRetryInitialInterval   = "loopdetect.retry.policy.initial_interval"
	AttrRetryBackoffRate       = "loopdetect.retry.policy.backoff_rate"
	AttrRetryMaxAttempts       = "loopdetect.retry.policy.max_attempts"
	AttrWaitOwner              = "loopdetect.wait.owner"
	AttrWaitDeadline           = "loopdetect.wait.deadline"
	AttrWaitReason             = "loopdetect.wait.reason"
	OperationInvokeAgent       = "invoke_agent"
	OperationExecuteTool       = "execute_tool"
	OperationChat              = "chat"
	defaultProvider            = "simulated"
	defaultModel               = "sim-model-1"
	defaultToolDuration        = 120 * time.Millisecond
	defaultChatDuration        = 800 * time.Millisecond
	seed000LoopCommand         = "gh issue list --state open | awk '{print $1}' | sort -n"
	seed000LoopResult          = "3\n7\n12\n15\n18\n21\n"
	seed000VariedCalls         = 16
	oscillationQuery           = "opentelemetry agent loop detection"
	approvalPendingChecks      = 6
	terminalTaskID             = "task-7f3a"
	healthyEditTestCycles      = 5
	paginationTotalRows        = 182
	paginationPageSize         = 50
	rateLimitInitialIntervalS  = 2.0
	rateLimitBackoffRate       = 2.0
	rateLimitMaxAttempts       = 5
	rateLimitFailingAttempts   = 3
	approvalWaitDeadlineOffset = 15 * time.Minute
)

// Call is one tool call of a scenario.
type Call struct {
	// Tool is gen_ai.tool.name; the span is named "execute_tool <Tool>".
	Tool string
	// Args is the JSON arguments string (gen_ai.tool.call.arguments).
	Args string
	// Result is the tool result, JSON or plain text (gen_ai.tool.call.result).
	Result string
	// ErrorType, when set, marks the call failed: span status Error and error.type.
	ErrorType string
	// ErrorMessage is the span status description of a failed call.
	ErrorMessage string
	// Gap is the scenario time from the start of the previous tool call to
	// the start of this one (divided by the run's speed factor).
	Gap time.Duration
	// Duration is how long the tool runs (divided by the speed factor).
	Duration time.Duration
	// NoChat suppresses the chat span before this call.
	NoChat bool
	// Fingerprint is the loopdetect.progress.fingerprint evidence, if any.
	Fingerprint string
	// Retry carries the loopdetect.retry.* evidence, if any.
	Retry *Retry
	// Wait carries the loopdetect.wait.* lease evidence, if any.
	Wait *Wait
}

// Retry is the retry evidence of a call: attempt number and the policy.
type Retry struct {
	Attempt             int
	InitialIntervalSecs float64
	BackoffRate         float64
	MaxAttempts         int
}

// Wait is a wait lease: an owner and a deadline relative to the call's start.
type Wait struct {
	Owner      string
	DeadlineIn time.Duration
	Reason     string
}

// Scenario is a named agent behaviour.
type Scenario struct {
	// Name is what --scenario selects.
	Name string
	// Aliases are older names --scenario still accepts.
	Aliases []string
	// Description is one line for --help.
	Description string
	// Agent is gen_ai.agent.name.
	Agent string
	// Loops is true when the scenario never finishes on its own (it repeats
	// until the agent is killed or the call cap is reached).
	Loops bool
	// Healthy is true when loop detection must not reach stuck on it.
	Healthy bool
	// Next returns call i (0-based), or false when the scenario is finished.
	Next func(i int) (Call, bool)
}

// All returns every scenario, sorted by name.
func All() []Scenario {
	s := []Scenario{
		seed000(), oscillation(), pagination(), rateLimit(), approval(), terminalReread(), healthyEditTest(),
	}
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	return s
}

// Names returns the scenario names, sorted.
func Names() []string {
	var n []string
	for _, s := range All() {
		n = append(n, s.Name)
	}
	return n
}

// Get returns the scenario with the given name.
func Get(name string) (Scenario, error) {
	for _, s := range All() {
		if s.Name == name || slices.Contains(s.Aliases, name) {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Names(), ", "))
}

func jsonArgs(kv ...string) string {
	// Small deterministic JSON object writer for string-valued arguments,
	// written in the given key order (as a real client would).
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", kv[i], kv[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

// seed000 reproduces the 1,972-call incident: sixteen normal, varied tool calls, then the
// same bash call with the same valid answer, forever.
func seed000() Scenario {
	varied := []Call{
		{Tool: "read_file", Args: jsonArgs("path", "README.md"), Result: "# pi\nA small coding agent.\n"},
		{Tool: "bash", Args: jsonArgs("command", "git status --short"), Result: " M internal/queue/queue.go\n"},
		{Tool: "bash", Args: jsonArgs("command", "git log --oneline -5"), Result: "a1b2c3d fix queue drain\n9f8e7d6 add retries\n"},
		{Tool: "list_dir", Args: jsonArgs("path", "internal/queue"), Result: `["queue.go","queue_test.go"]`},
		{Tool: "read_file", Args: jsonArgs("path", "internal/queue/queue.go"), Result: "package queue\n\nfunc Drain() {}\n"},
		{Tool: "grep", Args: jsonArgs("pattern", "Drain(", "path", "."), Result: "internal/queue/queue.go:3\ncmd/pi/main.go:41\n"},
		{Tool: "read_file", Args: jsonArgs("path", "cmd/pi/main.go"), Result: "package main\n\nfunc main() { queue.Drain() }\n"},
		{Tool: "bash", Args: jsonArgs("command", "go build ./..."), Result: ""},
		{Tool: "bash", Args: jsonArgs("command", "go test ./internal/queue/"), Result: "ok  \tpi/internal/queue\t0.012s\n"},
		{Tool: "edit_file", Args: jsonArgs("path", "internal/queue/queue.go", "old", "func Drain() {}", "new", "func Drain() { flush() }"), Result: `{"ok":true}`},
		{Tool: "bash", Args: jsonArgs("command", "go test ./internal/queue/"), Result: "ok  \tpi/internal/queue\t0.015s\n"},
		{Tool: "bash", Args: jsonArgs("command", "git diff --stat"), Result: " internal/queue/queue.go | 2 +-\n"},
		{Tool: "bash", Args: jsonArgs("command", "git commit -am 'queue: flush on drain'"), Result: "[main 4d5e6f7] queue: flush on drain\n"},
		{Tool: "web_fetch", Args: jsonArgs("url", "https://example.invalid/issues/12"), Result: "Issue 12: drain loses messages"},
		{Tool: "bash", Args: jsonArgs("command", "gh issue view 12"), Result: "title: drain loses messages\nstate: OPEN\n"},
		{Tool: "bash", Args: jsonArgs("command", "gh issue comment 12 --body 'fixed in 4d5e6f7'"), Result: "https://example.invalid/issues/12#c1\n"},
	}
	loop := Call{Tool: "bash", Args: jsonArgs("command", seed000LoopCommand), Result: seed000LoopResult}
	return Scenario{
		Name:        "bash-loop",
		Aliases:     []string{"seed000"},
		Description: "the 1,972-call incident: 16 varied calls, then the same bash call with the same result until killed",
		Agent:       "pi",
		Loops:       true,
		Next: func(i int) (Call, bool) {
			var c Call
			if i < len(varied) {
				c = varied[i]
				c.Gap = 3 * time.Second
			} else {
				c = loop
				c.Gap = 8 * time.Second
			}
			if i == 0 {
				c.Gap = 0
			}
			return c, true
		},
	}
}

// oscillation is the A-B-A-B search/read oscillation over an unchanged brief, with an unchanged
// brief.
func oscillation() Scenario {
	a := Call{Tool: "web_search", Args: jsonArgs("query", oscillationQuery, "page_token", ""),
		Result: `{"results":[{"id":"src-1","title":"Detecting agent loops"},{"id":"src-2","title":"Periodicity in traces"}]}`}
	b := Call{Tool: "read_document", Args: jsonArgs("doc_id", "brief-1"),
		Result: `{"doc_id":"brief-1","accepted_sources":["src-1"],"text":"Loops are periodic action sequences."}`}
	return Scenario{
		Name:        "oscillation",
		Description: "a search/read oscillation: A-B-A-B web_search/read_document with an unchanged brief, until killed",
		Agent:       "researcher",
		Loops:       true,
		Next: func(i int) (Call, bool) {
			c := a
			if i%2 == 1 {
				c = b
			}
			c.Gap = 4 * time.Second
			if i == 0 {
				c.Gap = 0
			}
			c.Fingerprint = "brief:sha4:9c1e"
			return c, true
		},
	}
}

// pagination is healthy: distinct cursors, the accepted row count grows
// 50 → 182, then the agent finishes.
func pagination() Scenario {
	pages := (paginationTotalRows + paginationPageSize - 1) / paginationPageSize
	return Scenario{
		Name:        "pagination",
		Description: "healthy: list_catalog over 4 pages (distinct cursors, rows 50 -> 182), then a summary; finishes",
		Agent:       "cataloguer",
		Healthy:     true,
		Next: func(i int) (Call, bool) {
			switch {
			case i < pages:
				cursor := ""
				if i > 0 {
					cursor = fmt.Sprintf("cur_%04d", i*paginationPageSize)
				}
				rows := min((i+1)*paginationPageSize, paginationTotalRows)
				next := ""
				if i+1 < pages {
					next = fmt.Sprintf("cur_%04d", (i+1)*paginationPageSize)
				}
				gap := 3 * time.Second
				if i == 0 {
					gap = 0
				}
				return Call{
					Tool:        "list_catalog",
					Args:        fmt.Sprintf(`{"catalog":"products","cursor":%q,"limit":%d}`, cursor, paginationPageSize),
					Result:      fmt.Sprintf(`{"page_rows":%d,"accepted_rows":%d,"next_cursor":%q}`, rows-i*paginationPageSize, rows, next),
					Gap:         gap,
					Fingerprint: fmt.Sprintf("rows:%d", rows),
				}, true
			case i == pages:
				return Call{
					Tool:        "write_file",
					Args:        jsonArgs("path", "catalog.csv", "rows", fmt.Sprint(paginationTotalRows)),
					Result:      fmt.Sprintf(`{"written_rows":%d}`, paginationTotalRows),
					Gap:         3 * time.Second,
					Fingerprint: fmt.Sprintf("rows:%d;file:catalog.csv", paginationTotalRows),
				}, true
			}
			return Call{}, false
		},
	}
}

// rateLimit fails with 429 three times, retrying after 2 s, 4 s and 8 s, and
// then succeeds.
func rateLimit() Scenario {
	args := jsonArgs("model", "embed-small", "input", "quarterly report section 3")
	return Scenario{
		Name:        "ratelimit",
		Description: "retry: 3 calls fail with 429, retried after 2s, 4s, 8s (policy 2s x2, 5 attempts), then success; finishes",
		Agent:       "embedder",
		Healthy:     true,
		Next: func(i int) (Call, bool) {
			policy := func(attempt int) *Retry {
				return &Retry{Attempt: attempt, InitialIntervalSecs: rateLimitInitialIntervalS,
					BackoffRate: rateLimitBackoffRate, MaxAttempts: rateLimitMaxAttempts}
			}
			switch {
			case i == 0:
				return Call{Tool: "read_file", Args: jsonArgs("path", "report.md"), Result: "# Q3 report\n..."}, true
			case i <= rateLimitFailingAttempts+1:
				attempt := i
				c := Call{Tool: "create_embedding", Args: args, Retry: policy(attempt)}
				c.Gap = 2 * time.Second
				if attempt > 1 {
					c.Gap = time.Duration(rateLimitInitialIntervalS*float64(time.Second)) << (attempt - 2)
				}
				if attempt <= rateLimitFailingAttempts {
					c.ErrorType = "429"
					c.ErrorMessage = "429: rate limit exceeded, retry later"
					c.Result = `{"error":{"code":429,"message":"Rate limit exceeded"}}`
					// The failing attempts have no chat turn in between: the
					// client library retries on its own schedule.
					c.NoChat = attempt > 1
				} else {
					c.Result = `{"embedding_id":"emb-31","dims":768}`
					c.NoChat = true
				}
				return c, true
			case i == rateLimitFailingAttempts+2:
				return Call{Tool: "write_file", Args: jsonArgs("path", "embeddings.json"), Result: `{"ok":true}`, Gap: 2 * time.Second}, true
			}
			return Call{}, false
		},
	}
}

// approval checks a deployment's status repeatedly under a wait lease
// (owner + future deadline) until the approval arrives, then deploys.
func approval() Scenario {
	check := jsonArgs("change_id", "CHG-1042")
	return Scenario{
		Name:        "approval",
		Description: "waiting: repeated get_change_status under a wait lease (owner + future deadline), approval arrives, deploy; finishes",
		Agent:       "deployer",
		Healthy:     true,
		Next: func(i int) (Call, bool) {
			switch {
			case i == 0:
				return Call{Tool: "request_approval", Args: jsonArgs("change_id", "CHG-1042", "approver", "release-managers"),
					Result: `{"change_id":"CHG-1042","status":"pending_approval"}`}, true
			case i <= approvalPendingChecks:
				return Call{Tool: "get_change_status", Args: check, Gap: 5 * time.Second,
					Result:      `{"change_id":"CHG-1042","status":"pending_approval"}`,
					Fingerprint: "change:CHG-1042:pending_approval",
					Wait: &Wait{Owner: "release-managers", DeadlineIn: approvalWaitDeadlineOffset,
						Reason: "change CHG-1042 awaits approval"}}, true
			case i == approvalPendingChecks+1:
				return Call{Tool: "get_change_status", Args: check, Gap: 5 * time.Second,
					Result:      `{"change_id":"CHG-1042","status":"approved","approved_by":"alice"}`,
					Fingerprint: "change:CHG-1042:approved"}, true
			case i == approvalPendingChecks+2:
				return Call{Tool: "deploy", Args: jsonArgs("change_id", "CHG-1042", "env", "production"), Gap: 2 * time.Second,
					Result: `{"deployment":"dep-88","status":"rolled_out"}`, Fingerprint: "deploy:dep-88:rolled_out"}, true
			}
			return Call{}, false
		},
	}
}

// terminalReread submits an async task, polls it to completion, then keeps
// re-reading the same complete result (the async-task incident) until killed.
func terminalReread() Scenario {
	read := jsonArgs("task_id", terminalTaskID)
	complete := `{"task_id":"` + terminalTaskID + `","state":"complete","result":{"summary":"3 regressions in checkout latency","tickets_suggested":2}}`
	return Scenario{
		Name:        "terminal-reread",
		Description: "an async task reaches state=complete, then the agent re-reads the same complete result until killed",
		Agent:       "analyst",
		Loops:       true,
		Next: func(i int) (Call, bool) {
			switch i {
			case 0:
				return Call{Tool: "submit_task", Args: jsonArgs("kind", "analyze_latency", "window", "24h"),
					Result: `{"task_id":"` + terminalTaskID + `","state":"queued"}`}, true
			case 1:
				return Call{Tool: "get_task_result", Args: read, Gap: 3 * time.Second,
					Result: `{"task_id":"` + terminalTaskID + `","state":"running","progress":0.4}`}, true
			}
			return Call{Tool: "get_task_result", Args: read, Gap: 3 * time.Second, Result: complete}, true
		},
	}
}

// healthyEditTest is an edit/test cycle: the same run_tests call repeats, but
// the failing-test count (and the tree digest) changes each time; finishes
// when the tests pass.
func healthyEditTest() Scenario {
	return Scenario{
		Name:        "healthy-edit-test",
		Description: "healthy: edit_file/run_tests cycles, the test result changes every time (5 -> 0 failing); finishes",
		Agent:       "coder",
		Healthy:     true,
		Next: func(i int) (Call, bool) {
			if i >= 2*healthyEditTestCycles {
				return Call{}, false
			}
			cycle := i / 2
			failing := healthyEditTestCycles - 1 - cycle
			tree := fmt.Sprintf("tree:%08x", 0x5eed0000+cycle*0x1111)
			gap := 4 * time.Second
			if i == 0 {
				gap = 0
			}
			if i%2 == 0 {
				return Call{Tool: "edit_file", Gap: gap,
					Args:        fmt.Sprintf(`{"path":"parser/parse.go","old":"case %d:","new":"case %d, %d:"}`, cycle, cycle, cycle+1),
					Result:      `{"ok":true}`,
					Fingerprint: tree + ";tests:unknown"}, true
			}
			res := fmt.Sprintf("FAIL: %d failing of 40", failing)
			if failing == 0 {
				res = "ok: 40 passed"
			}
			return Call{Tool: "run_tests", Gap: gap, Duration: 900 * time.Millisecond,
				Args:        jsonArgs("command", "go test ./parser/"),
				Result:      res,
				Fingerprint: fmt.Sprintf("%s;tests:%d-failing", tree, failing)}, true
		},
	}
}
