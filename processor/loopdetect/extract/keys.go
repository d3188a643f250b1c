package extract

import "strings"

// Match classifies a span as a tool call when attribute Key equals Value
// (case-insensitively); Client names the recognised client shape.
type Match struct {
	Key    string `mapstructure:"key"`
	Value  string `mapstructure:"value"`
	Client string `mapstructure:"client"`
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

// EventKey reads a value from the attribute Key of span events named Event.
type EventKey struct {
	Event string `mapstructure:"event"`
	Key   string `mapstructure:"key"`
}

// Keys are the attribute key lists of SPEC §3, each evaluated in order,
// first hit wins.
type Keys struct {
	// ToolCall are the attribute matches that make a span a tool call.
	ToolCall []Match `mapstructure:"tool_call"`
	// ToolSpanNames are the span names that make a span a tool call.
	ToolSpanNames []NameMatch `mapstructure:"tool_span_names"`
	// SkipToolNames are tool names never counted (e.g. "(merged tools)").
	SkipToolNames []string `mapstructure:"skip_tool_names"`
	// ToolName keys; else the span name with NamePrefixes/NameSuffixes cut.
	ToolName     []string `mapstructure:"tool_name"`
	NamePrefixes []string `mapstructure:"name_prefixes"`
	NameSuffixes []string `mapstructure:"name_suffixes"`
	// Arguments and Result keys; the *Events lists are read when no key matched.
	Arguments      []string   `mapstructure:"arguments"`
	ArgumentEvents []EventKey `mapstructure:"argument_events"`
	Result         []string   `mapstructure:"result"`
	ResultEvents   []EventKey `mapstructure:"result_events"`
	// CallID keys; IgnoreCallIDs are placeholder values that mean "none".
	CallID        []string `mapstructure:"call_id"`
	IgnoreCallIDs []string `mapstructure:"ignore_call_ids"`
	// ErrorType and ToolStatus keys; RetryMarkers are result texts that
	// mean "failed, please retry".
	ErrorType    []string `mapstructure:"error_type"`
	ToolStatus   []string `mapstructure:"tool_status"`
	RetryMarkers []string `mapstructure:"retry_markers"`
	// Session keys, looked up on the span, then the resource; empty or no
	// hit means the trace id.
	Session []string `mapstructure:"session"`
	// Agent keys, span then resource.
	Agent []string `mapstructure:"agent"`
	// The product's evidence attributes.
	Fingerprint          string `mapstructure:"fingerprint"`
	RetryAttempt         string `mapstructure:"retry_attempt"`
	RetryInitialInterval string `mapstructure:"retry_initial_interval"`
	RetryBackoffRate     string `mapstructure:"retry_backoff_rate"`
	RetryMaxAttempts     string `mapstructure:"retry_max_attempts"`
	WaitOwner            string `mapstructure:"wait_owner"`
	WaitDeadline         string `mapstructure:"wait_deadline"`
	WaitReason           string `mapstructure:"wait_reason"`
}

// DefaultKeys returns SPEC §3's key lists and the product's evidence
// attribute names.
func DefaultKeys() Keys {
	return Keys{
		ToolCall: []Match{
			{Key: "gen_ai.operation.name", Value: "execute_tool", Client: "genai_semconv"},
			{Key: "openinference.span.kind", Value: "TOOL", Client: "openinference"},
			{Key: "traceloop.span.kind", Value: "tool", Client: "traceloop"},
			{Key: "mcp.method.name", Value: "tools/call", Client: "mcp"},
		},
		ToolSpanNames: []NameMatch{
			{Name: "ai.toolCall", Client: "vercel_ai"},
			{Name: "claude_code.tool", Client: "claude_code"},
		},
		SkipToolNames: []string{"(merged tools)"},
		ToolName:      []string{"gen_ai.tool.name", "tool.name", "ai.toolCall.name", "traceloop.entity.name"},
		NamePrefixes:  []string{"execute_tool "},
		NameSuffixes:  []string{".tool", ".run"},
		Arguments:     []string{"gen_ai.tool.call.arguments", "input.value", "gcp.vertex.agent.tool_call_args", "ai.toolCall.args", "traceloop.entity.input"},
		Result:        []string{"gen_ai.tool.call.result", "output.value", "gcp.vertex.agent.tool_response", "ai.toolCall.result", "traceloop.entity.output"},
		CallID:        []string{"gen_ai.tool.call.id", "tool.id", "ai.toolCall.id"},
		IgnoreCallIDs: []string{"unknown", "<not specified>"},
		ErrorType:     []string{"error.type"},
		ToolStatus:    []string{"gen_ai.tool.status"},
		RetryMarkers:  []string{"An error occurred while running the tool. Please try again."},
		Agent:         []string{"gen_ai.agent.name", "gen_ai.agent.id"},

		Fingerprint:          "loopdetect.progress.fingerprint",
		RetryAttempt:         "loopdetect.retry.attempt",
		RetryInitialInterval: "loopdetect.retry.policy.initial_interval",
		RetryBackoffRate:     "loopdetect.retry.policy.backoff_rate",
		RetryMaxAttempts:     "loopdetect.retry.policy.max_attempts",
		WaitOwner:            "loopdetect.wait.owner",
		WaitDeadline:         "loopdetect.wait.deadline",
		WaitReason:           "loopdetect.wait.reason",
	}
}
