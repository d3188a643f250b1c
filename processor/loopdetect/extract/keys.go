package extract

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// Match tests one span attribute: Key equals Value (case-insensitively)
// when Value is set, else the string value starts with Prefix when Prefix is
// set, else Key is present. Client names the recognised client shape.
type Match struct {
	Key    string `mapstructure:"key"`
	Value  string `mapstructure:"value"`
	Prefix string `mapstructure:"prefix"`
	Client string `mapstructure:"client"`
}

func (m *Match) matchValue(v Value) bool {
	if v.Kind == KindString {
		return m.MatchesString(v.Str)
	}
	switch {
	case m.Value != "":
		return strings.EqualFold(v.Text(), m.Value)
	case m.Prefix != "":
		return false
	}
	return true
}

// EqualFold is strings.EqualFold, deciding at once the common case of
// different ASCII first bytes (an operation name against "execute_tool").
func EqualFold(s, t string) bool {
	return !FoldMismatch(s, t) && strings.EqualFold(s, t)
}

// FoldMismatch reports a sure mismatch of strings.EqualFold(s, t) from
// their first bytes: ASCII folds only A-Z to a-z, which differ in bit 0x20
// alone. It is small enough to inline, so a hot loop can skip the call.
func FoldMismatch(s, t string) bool {
	return len(s) > 0 && len(t) > 0 && s[0]|t[0] < utf8.RuneSelf && (s[0]^t[0])&^0x20 != 0
}

// MatchesString is Matches for a string value, which the caller need not
// wrap in a Value.
func (m *Match) MatchesString(s string) bool {
	switch {
	case m.Value != "":
		// The spelling configured is the one most spans send.
		return s == m.Value || EqualFold(s, m.Value)
	case m.Prefix != "":
		return strings.HasPrefix(s, m.Prefix)
	}
	return true
}

// NameMatch classifies a span as a tool call by its name: exact Name, or
// Prefix when set.
type NameMatch struct {
	Name   string `mapstructure:"name"`
	Prefix string `mapstructure:"prefix"`
	Client string `mapstructure:"client"`
}

func (m NameMatch) matchName(n string) bool {
	if m.Prefix != "" {
		return strings.HasPrefix(n, m.Prefix)
	}
	return n == m.Name
}

// EventKey reads a value from the attribute Key of span events named Event,
// or of the span itself when Event is empty; Path, when set, selects a part
// of that JSON value: member names and array indexes separated by dots
// (e.g. "0.parts.0.arguments"). Without Event, Path is required.
type EventKey struct {
	Event string `mapstructure:"event"`
	Key   string `mapstructure:"key"`
	Path  string `mapstructure:"path"`
	// DropLines are the prefixes of the value's lines (a JSON string's,
	// at Path) that are not part of it: a shell tool's output that names a
	// new process each call would otherwise read as progress every time.
	DropLines []string `mapstructure:"drop_lines"`
}

// ClientLines names, for one client, the prefixes of its results' lines
// that are not part of the result.
type ClientLines struct {
	Client   string   `mapstructure:"client"`
	Prefixes []string `mapstructure:"prefixes"`
}

// ClientKey names, for one client, an attribute key, and with Path a part
// of its JSON value (member names and array indexes separated by dots).
type ClientKey struct {
	Client string `mapstructure:"client"`
	Key    string `mapstructure:"key"`
	Path   string `mapstructure:"path"`
}

// SubagentSpan names the tool spans of a client's subagents: Name, the
// span's name, for an agent other than MainAgent, the client's own.
type SubagentSpan struct {
	Name      string `mapstructure:"name"`
	MainAgent string `mapstructure:"main_agent"`
}

// Keys are the attribute key lists (docs/clients.md), each evaluated in order,
// first hit wins.
type Keys struct {
	// ToolCall are the attribute matches that make a span a tool call.
	ToolCall []Match `mapstructure:"tool_call"`
	// ToolSpanNames are the span names that make a span a tool call.
	ToolSpanNames []NameMatch `mapstructure:"tool_span_names"`
	// ClientHints refine the client name of a span already classified as a
	// tool call (first hit wins), e.g. an execute_tool span from Google ADK.
	ClientHints []Match `mapstructure:"client_hints"`
	// SkipToolNames are tool names never counted (e.g. "(merged tools)").
	SkipToolNames []string `mapstructure:"skip_tool_names"`
	// SkipSpans are tool spans never counted as actions (e.g. Pydantic AI's
	// output tool, whose logfire.msg starts "running output function").
	SkipSpans []Match `mapstructure:"skip_spans"`
	// ToolName keys; else the span name with NamePrefixes/NameSuffixes cut.
	ToolName     []string `mapstructure:"tool_name"`
	NamePrefixes []string `mapstructure:"name_prefixes"`
	NameSuffixes []string `mapstructure:"name_suffixes"`
	// Arguments and Result keys; the *Events lists are read when no key matched.
	Arguments      []string   `mapstructure:"arguments"`
	ArgumentEvents []EventKey `mapstructure:"argument_events"`
	Result         []string   `mapstructure:"result"`
	ResultEvents   []EventKey `mapstructure:"result_events"`
	// ResultDropLines are, per client, the prefixes of a plain-text
	// result's lines left out of it, wherever the result was read: Codex
	// CLI's shell output names a new chunk id and wall time every call,
	// which would otherwise read as progress.
	ResultDropLines []ClientLines `mapstructure:"result_drop_lines"`
	// Redacted are argument/result values that mean "content not recorded"
	// (Google ADK's "{}" with capture off, OpenInference's "__REDACTED__"):
	// treated as absent, never as content.
	Redacted []Match `mapstructure:"redacted"`
	// CallID keys; IgnoreCallIDs are placeholder values that mean "none".
	CallID        []string `mapstructure:"call_id"`
	IgnoreCallIDs []string `mapstructure:"ignore_call_ids"`
	// ErrorType and ToolStatus keys; RetryMarkers are result texts that
	// mean "failed, please retry".
	ErrorType    []string `mapstructure:"error_type"`
	ToolStatus   []string `mapstructure:"tool_status"`
	RetryMarkers []string `mapstructure:"retry_markers"`
	// Failure are further attribute values that mark a failed call (Claude
	// Code's success = "false").
	Failure []Match `mapstructure:"failure"`
	// Session keys, looked up on the span, then the resource; empty or no
	// hit means the trace id.
	Session []string `mapstructure:"session"`
	// SubagentSession names, per client, the attribute (and the part of
	// it, for a JSON value) in which a call of one of its subagents
	// carries the subagent's id: such a call is the subagent's session,
	// keyed by that id, whatever Session finds. Claude Code's subagents
	// (its Agent tool) share the main agent's session.id in its logs, and
	// run side by side doing the same first reads: each loops, or not, on
	// its own, and its PreToolUse hook names it by the same agent_id.
	// Gemini CLI's name the invoke_agent call that started them
	// (parentCallId) in the request their tool span records.
	SubagentSession []ClientKey `mapstructure:"subagent_session"`
	// SubagentSpans name the tool spans a client's subagents make under a
	// span of their own with no id of theirs on the call: such a span
	// whose agent (Agent) is not the client's own is the subagent's
	// session, keyed by its parent span's id. Qwen Code's subagents'
	// qwen-code.tool spans carry the main agent's session.id and the
	// subagent's type as gen_ai.agent.name, each subagent's calls under
	// its own qwen-code.subagent span.
	SubagentSpans []SubagentSpan `mapstructure:"subagent_spans"`
	// Agent keys, span then resource.
	Agent []string `mapstructure:"agent"`
	// InputTokens and OutputTokens are the token usage keys of LLM spans
	// (first hit wins in each list); TotalTokens is read only when neither
	// input nor output is present. A span that is a tool call is never
	// read for usage.
	InputTokens  []string `mapstructure:"input_tokens"`
	OutputTokens []string `mapstructure:"output_tokens"`
	TotalTokens  []string `mapstructure:"total_tokens"`
	// UsageSkip are spans whose usage sums that of spans nested in them
	// (Vercel AI SDK's ai.generateText around its ai.generateText.doGenerate
	// steps, an agent span summing its model calls): not counted again.
	UsageSkip []Match `mapstructure:"usage_skip"`
	// The product's evidence attributes.
	Fingerprint          string `mapstructure:"fingerprint"`
	RetryAttempt         string `mapstructure:"retry_attempt"`
	RetryInitialInterval string `mapstructure:"retry_initial_interval"`
	RetryBackoffRate     string `mapstructure:"retry_backoff_rate"`
	RetryMaxAttempts     string `mapstructure:"retry_max_attempts"`
	WaitOwner            string `mapstructure:"wait_owner"`
	WaitDeadline         string `mapstructure:"wait_deadline"`
	WaitReason           string `mapstructure:"wait_reason"`

	// Waits says which calls are polls the engine may grant an implicit
	// lease (engine.WaitReader). Not a key list: the processor sets it
	// from its implicit_wait settings, which the engine applies too.
	Waits engine.ImplicitWaitConfig `mapstructure:"-"`
}

// DefaultKeys returns the recognised frameworks' key lists and the product's evidence
// attribute names.
//
//nolint:funlen // One literal: the key table, a line per key, read as a table.
func DefaultKeys() Keys {
	return Keys{
		ToolCall: []Match{
			{Key: "gen_ai.operation.name", Value: "execute_tool", Client: "genai_semconv"},
			{Key: "openinference.span.kind", Value: "TOOL", Client: "openinference"},
			{Key: "traceloop.span.kind", Value: "tool", Client: "traceloop"},
			{Key: "mcp.method.name", Value: "tools/call", Client: "mcp"},
			// Gemini CLI's tool_call spans (its own operation name).
			{Key: "gen_ai.operation.name", Value: "tool_call", Client: "gemini_cli"},
			// OpenAI Codex CLI's codex.tool_result log events (its OTel
			// exporter names the records' event after its source line, so
			// only the attribute names the event).
			{Key: "event.name", Value: "codex.tool_result", Client: "codex_cli"},
		},
		ToolSpanNames: []NameMatch{
			{Name: "ai.toolCall", Client: "vercel_ai"},
			{Name: "claude_code.tool", Client: "claude_code"},
			// Claude Code's tool_result log events (logs input), and its
			// tool_decision events of calls it refused to run (the logs
			// input keeps only rejections).
			{Name: "claude_code.tool_result", Client: "claude_code"},
			{Name: "claude_code.tool_decision", Client: "claude_code"},
			// Logfire's OpenAI Agents integration names spans by their
			// message template.
			{Prefix: "Function: ", Client: "openai_agents_logfire"},
			// Pydantic AI instrumentation version 1–2 ("running tool") and
			// older execute_tool spans without gen_ai.operation.name.
			{Name: "running tool", Client: "pydantic_ai"},
			{Prefix: "execute_tool ", Client: "genai_semconv"},
		},
		ClientHints: []Match{
			{Key: "ai.operationId", Value: "ai.toolCall", Client: "vercel_ai"},
			{Key: "gcp.vertex.agent.tool_call_args", Client: "google_adk"},
			{Key: "gcp.vertex.agent.tool_response", Client: "google_adk"},
			{Key: "gcp.vertex.agent.llm_request", Client: "google_adk"},
			{Key: "logfire.msg", Prefix: "running tool", Client: "pydantic_ai"},
			{Key: "logfire.msg", Prefix: "invalid tool call", Client: "pydantic_ai"},
			{Key: "gen_ai.system", Value: "strands-agents", Client: "strands"},
			{Key: "gen_ai.provider.name", Value: "strands-agents", Client: "strands"},
			{Key: "mcp.method.name", Value: "tools/call", Client: "mcp"},
			{Key: "tool.agent_role", Client: "crewai"},
			{Key: "tool.run_attempts", Client: "crewai"},
			// Qwen Code's qwen-code.tool spans (execute_tool) of its main
			// agent.
			{Key: "gen_ai.agent.name", Value: "qwen-code", Client: "qwen_code"},
		},
		SkipToolNames: []string{"(merged tools)"},
		SkipSpans: []Match{
			{Key: "logfire.msg", Prefix: "running output function"},
			// Qwen Code's span of a call its PreToolUse hook refused, or
			// that was cancelled before it ran (0.24.4 records some
			// refusals so): it never ran, and its new error would read as
			// the loop's end.
			{Key: "tool.failure_kind", Value: "pre_hook_blocked"},
			{Key: "tool.failure_kind", Value: "cancelled"},
		},
		ToolName:     []string{"gen_ai.tool.name", "tool.name", "ai.toolCall.name", "traceloop.entity.name", "tool_name", "name"},
		NamePrefixes: []string{"execute_tool ", "tools/call ", "Function: "},
		NameSuffixes: []string{".tool", ".run"},
		Arguments: []string{
			"gen_ai.tool.call.arguments", "input.value", "gcp.vertex.agent.tool_call_args", "ai.toolCall.args",
			"traceloop.entity.input", "ai.toolCall.input", "tool_arguments", "tool_input", "tool_parameters", "full_command", "input",
			// Codex CLI's codex.tool_result: the call's JSON arguments.
			"arguments",
		},
		ArgumentEvents: []EventKey{
			{Event: "gen_ai.tool.message", Key: "content"},
			{Event: "gen_ai.client.inference.operation.details", Key: "gen_ai.input.messages", Path: "0.parts.0.arguments"},
			// Gemini CLI: the tool call request as JSON, with
			// GEMINI_TELEMETRY_TRACES_ENABLED.
			{Key: "gen_ai.input.messages", Path: "args"},
		},
		Result: []string{
			"gen_ai.tool.call.result", "output.value", "gcp.vertex.agent.tool_response", "ai.toolCall.result",
			"traceloop.entity.output", "ai.toolCall.output", "tool_response", "output",
		},
		ResultEvents: []EventKey{
			{Event: "gen_ai.choice", Key: "message"},
			{Event: "gen_ai.client.inference.operation.details", Key: "gen_ai.output.messages", Path: "0.parts.0.response"},
			{Event: "tool.output", Key: "output"},
			{Event: "tool.output", Key: "tool_output"},
			// Gemini CLI: the tool's response. Its shell tool ends its
			// output with the process group it ran, new every call.
			{
				Key: "gen_ai.output.messages", Path: "response.responseParts.0.functionResponse.response.output",
				DropLines: []string{"Process Group PGID: ", "Background PIDs: ", "<hook_context>"},
			},
		},
		SubagentSession: []ClientKey{
			{Client: "claude_code", Key: "agent_id"},
			{Client: "gemini_cli", Key: "gen_ai.input.messages", Path: "parentCallId"},
		},
		SubagentSpans: []SubagentSpan{{Name: "qwen-code.tool", MainAgent: "qwen-code"}},
		ResultDropLines: []ClientLines{
			{Client: "codex_cli", Prefixes: []string{"Chunk ID: ", "Wall time: "}},
		},
		Redacted: []Match{
			{Key: "gcp.vertex.agent.tool_call_args", Value: "{}"},
			{Key: "gcp.vertex.agent.tool_response", Value: "{}"},
			{Key: "gcp.vertex.agent.tool_response", Value: `{"result": "<not specified>"}`},
			{Key: "input.value", Value: "__REDACTED__"},
			{Key: "output.value", Value: "__REDACTED__"},
		},
		CallID:        []string{"gen_ai.tool.call.id", "tool.id", "ai.toolCall.id", "tool_use_id", "gen_ai.tool.call_id"},
		IgnoreCallIDs: []string{"unknown", "<not specified>"},
		ErrorType:     []string{"error.type"},
		ToolStatus:    []string{"gen_ai.tool.status"},
		RetryMarkers: []string{
			// OpenAI Agents SDK's default tool error function.
			"An error occurred while running the tool. Please try again.",
			// CrewAI's refusal of a repeated identical call.
			"I tried reusing the same input, I must stop using this action input.",
			// Pydantic AI's retry prompt (ModelRetry / validation error).
			"Fix the errors and try again.",
		},
		Failure: []Match{
			{Key: "success", Value: "false"},
		},
		Agent: []string{"gen_ai.agent.name", "gen_ai.agent.id"},
		// GenAI semantic conventions (current and pre-1.27 names),
		// OpenInference, Vercel AI SDK (v4 and v5 names).
		InputTokens: []string{
			"gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt",
			"ai.usage.inputTokens", "ai.usage.promptTokens",
		},
		OutputTokens: []string{
			"gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
			"ai.usage.outputTokens", "ai.usage.completionTokens",
		},
		TotalTokens: []string{"gen_ai.usage.total_tokens", "llm.token_count.total", "ai.usage.totalTokens"},
		UsageSkip: []Match{
			{Key: "ai.operationId", Value: "ai.generateText"},
			{Key: "ai.operationId", Value: "ai.streamText"},
			{Key: "ai.operationId", Value: "ai.generateObject"},
			{Key: "ai.operationId", Value: "ai.streamObject"},
			{Key: "gen_ai.operation.name", Value: "invoke_agent"},
			{Key: "openinference.span.kind", Value: "AGENT"},
			{Key: "openinference.span.kind", Value: "CHAIN"},
		},

		Fingerprint:          "loopdetect.progress.fingerprint",
		RetryAttempt:         "loopdetect.retry.attempt",
		RetryInitialInterval: "loopdetect.retry.policy.initial_interval",
		RetryBackoffRate:     "loopdetect.retry.policy.backoff_rate",
		RetryMaxAttempts:     "loopdetect.retry.policy.max_attempts",
		WaitOwner:            "loopdetect.wait.owner",
		WaitDeadline:         "loopdetect.wait.deadline",
		WaitReason:           "loopdetect.wait.reason",

		Waits: engine.DefaultImplicitWait(),
	}
}

// declaresTool reports whether v, the value of tool_call key key, is one of
// the values configured as a tool call for that key.
func (k *Keys) declaresTool(key string, v Value) bool {
	if v.Kind != KindString {
		return false
	}
	for _, m := range k.ToolCall {
		if m.Key == key && EqualFold(v.Str, m.Value) {
			return true
		}
	}
	return false
}

// Validate reports key lists that cannot work; messages use the YAML names
// of the lists.
func (k Keys) Validate() error {
	var errs []error
	if len(k.ToolCall) == 0 && len(k.ToolSpanNames) == 0 {
		errs = append(errs, errors.New("tool_call and tool_span_names are both empty: no span would be a tool call"))
	}
	for i, m := range k.ToolCall {
		if m.Key == "" || m.Value == "" {
			errs = append(errs, fmt.Errorf("tool_call[%d]: key and value are required", i))
		}
	}
	for i, m := range k.ToolSpanNames {
		if m.Name == "" && m.Prefix == "" {
			errs = append(errs, fmt.Errorf("tool_span_names[%d]: name or prefix is required", i))
		}
	}
	for i, sk := range k.SubagentSession {
		if sk.Client == "" || sk.Key == "" {
			errs = append(errs, fmt.Errorf("subagent_session[%d]: client and key are required", i))
		}
	}
	for i, sp := range k.SubagentSpans {
		if sp.Name == "" || sp.MainAgent == "" {
			errs = append(errs, fmt.Errorf("subagent_spans[%d]: name and main_agent are required", i))
		}
	}
	for _, l := range [...]struct {
		name string
		keys []EventKey
	}{{"argument_events", k.ArgumentEvents}, {"result_events", k.ResultEvents}} {
		for i, ek := range l.keys {
			if ek.Key == "" || (ek.Event == "" && ek.Path == "") {
				errs = append(errs, fmt.Errorf("%s[%d]: key is required, and path when event is empty", l.name, i))
			}
		}
	}
	return errors.Join(errs...)
}
