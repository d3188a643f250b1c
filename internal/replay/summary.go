package replay

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

// Counts are the loop_detect processor's own counters (its internal
// telemetry) after a replay.
type Counts struct {
	// Items are the spans and log records it looked at.
	Items int64
	// ToolCalls are the items it recognised as tool calls.
	ToolCalls int64
	// Degraded counts calls read with degraded evidence or dropped, by kind
	// (malformed, oversized, bad_evidence, duplicate, out_of_order,
	// no_session, foreign_verdict).
	Degraded map[string]int64
}

func countsOf(rm *metricdata.ResourceMetrics) Counts {
	c := Counts{Degraded: map[string]int64{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				switch m.Name {
				case "otelcol_loopdetect_spans":
					c.Items += dp.Value
				case "otelcol_loopdetect_tool_calls":
					c.ToolCalls += dp.Value
				case "otelcol_loopdetect_degraded":
					kind, _ := dp.Attributes.Value("kind")
					c.Degraded[kind.AsString()] += dp.Value
				}
			}
		}
	}
	return c
}

// SessionSummary is the per-session part of --summary.
type SessionSummary struct {
	Session string `json:"session"`
	// Client is the client shape of the session's first call.
	Client       string  `json:"client,omitempty"`
	Calls        int     `json:"calls"`
	FinalState   string  `json:"final_state"`
	Transitions  int     `json:"transitions"`
	Kills        int     `json:"kills"`
	DelayCalls   int64   `json:"detection_delay_calls,omitempty"`
	DelaySeconds float64 `json:"detection_delay_seconds,omitempty"`
	// StuckAtCall is the session's call (1-based) at which it was first
	// stuck: what an audit of past sessions asks first.
	StuckAtCall int64 `json:"stuck_at_call,omitempty"`
	// Transcript is the agent transcript the session was read from.
	Transcript string `json:"transcript,omitempty"`
	// ParentSession is, for a subagent's calls (tracked on their own), the
	// session of the agent that started it; StartedBy the parent's call
	// that did.
	ParentSession string `json:"parent_session,omitempty"`
	StartedBy     string `json:"started_by,omitempty"`
}

// ReadSummary says what the replay read and what the processor made of it.
type ReadSummary struct {
	Spans      int64 `json:"spans"`
	LogRecords int64 `json:"log_records"`
	// OtherSignalRequests are metrics or profiles requests, not read.
	OtherSignalRequests int64 `json:"other_signal_requests,omitempty"`
	// Files counts the files read by format (otlp_json,
	// claude_code_session, claude_code_stream_json, gemini_cli_session).
	Files map[string]int `json:"files_by_format,omitempty"`
	// TranscriptCalls are the tool calls read from agent transcripts,
	// each replayed as one log record.
	TranscriptCalls int64 `json:"transcript_tool_calls,omitempty"`
	// ToolCalls are the spans and records recognised as tool calls, by
	// client shape.
	ToolCalls         int64            `json:"tool_calls"`
	ToolCallsByClient map[string]int64 `json:"tool_calls_by_client"`
	// Degraded counts recognised calls read with weaker evidence: name_only
	// (no arguments recorded), malformed, oversized, bad_evidence,
	// out_of_order.
	Degraded map[string]int64 `json:"degraded"`
	// Skipped counts what was not counted as a call, by reason:
	// not_a_tool_call, no_session_key, repeated_delivery, earlier_verdict.
	Skipped map[string]int64 `json:"skipped"`
	// SkippedFiles are the inputs not read at all (unreadable, empty,
	// binary, a directory, or not a format loopreplay reads), each with
	// why; ReadInPart the inputs read with lines left out (lines before
	// the first JSON line, a last line cut short).
	SkippedFiles []FileNote `json:"skipped_files,omitempty"`
	ReadInPart   []FileNote `json:"read_in_part,omitempty"`
}

// FileNote says why an input was skipped or read in part.
type FileNote struct {
	File string `json:"file"`
	Note string `json:"note"`
}

// Summary is loopreplay's --summary output.
type Summary struct {
	// Message says in words what was read and found.
	Message  string           `json:"message"`
	Read     ReadSummary      `json:"read"`
	Sessions []SessionSummary `json:"sessions"`
	// States counts sessions by final state.
	States map[string]int `json:"final_states"`
	// Transitions counts transitions by target state.
	Transitions map[string]int `json:"transitions_by_state"`
	Kills       int            `json:"kills"`
}

// Summarize describes a replay of in under cfg.
func Summarize(cfg *loopdetect.Config, in *Input, res *Result) Summary {
	return tallyOf(res, false).summary(cfg, in, res.Counts)
}

// tallyOf folds a finished replay's calls and transitions.
func tallyOf(res *Result, page bool) *tally {
	t := newTally(page)
	for i := range res.Calls {
		t.call(&res.Calls[i])
	}
	for i := range res.Events {
		t.event(&res.Events[i])
	}
	return t
}

// joinNotes joins phrases into one line.
func joinNotes(notes []string) string {
	return strings.Join(notes, "; ")
}

func message(cfg *loopdetect.Config, sum *Summary) string {
	return readMessage(cfg, sum) + filesMessage(&sum.Read)
}

// filesMessage says how many inputs were skipped or read in part.
func filesMessage(r *ReadSummary) string {
	var parts []string
	if n := len(r.SkippedFiles); n > 0 {
		parts = append(parts, plural(int64(n), "file")+" skipped (read.skipped_files says why)")
	}
	if n := len(r.ReadInPart); n > 0 {
		parts = append(parts, plural(int64(n), "file")+" read in part (read.read_in_part)")
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

func readMessage(cfg *loopdetect.Config, sum *Summary) string {
	r := &sum.Read
	var b strings.Builder
	claude := int64(r.Files[FormatClaudeSession] + r.Files[FormatClaudeStreamJSON])
	gemini := int64(r.Files[FormatGeminiSession])
	codex := int64(r.Files[FormatCodexSession])
	qwen := int64(r.Files[FormatQwenSession])
	openCode := int64(r.Files[FormatOpenCodeExport])
	transcripts := claude + gemini + codex + qwen + openCode
	if transcripts == 0 || r.Spans+r.LogRecords > 0 {
		fmt.Fprintf(&b, "read %s and %s", plural(r.Spans, "span"), plural(r.LogRecords, "log record"))
		if transcripts > 0 {
			b.WriteString(", and ")
		}
	} else {
		b.WriteString("read ")
	}
	if transcripts > 0 {
		var from []string
		if claude > 0 {
			from = append(from, plural(claude, "Claude Code transcript"))
		}
		if gemini > 0 {
			from = append(from, plural(gemini, "Gemini CLI session file"))
		}
		if codex > 0 {
			from = append(from, plural(codex, "Codex CLI session file"))
		}
		if qwen > 0 {
			from = append(from, plural(qwen, "Qwen Code session file"))
		}
		if openCode > 0 {
			from = append(from, plural(openCode, "OpenCode session export"))
		}
		fmt.Fprintf(&b, "%s from %s", plural(r.TranscriptCalls, "tool call"), strings.Join(from, " and "))
	}
	if r.ToolCalls == 0 {
		b.WriteString("; no tool calls recognised. ")
		b.WriteString(lookedFor(cfg))
		if n := r.Skipped["no_session_key"]; n > 0 {
			fmt.Fprintf(&b, " %d tool-call log records were skipped: no session key (looked for %s) and no trace context.",
				n, strings.Join(logSessionKeys(cfg), ", "))
		}
		return b.String()
	}
	fmt.Fprintf(&b, "; recognised %s in %s", plural(r.ToolCalls, "tool call"), plural(int64(len(sum.Sessions)), "session"))
	var states []string
	for _, st := range []string{"working", "retrying", "waiting", "uncertain", "stuck"} {
		if n := sum.States[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(states) > 0 {
		fmt.Fprintf(&b, " (finally %s)", strings.Join(states, ", "))
	}
	fmt.Fprintf(&b, "; %s", plural(int64(sum.Kills), "kill"))
	if n := r.Skipped["no_session_key"]; n > 0 {
		fmt.Fprintf(&b, "; %d tool-call log records skipped for want of a session key (looked for %s)",
			n, strings.Join(logSessionKeys(cfg), ", "))
	}
	return b.String()
}

// lookedFor names the span and record names and the attributes that make a
// tool call under cfg.
func lookedFor(cfg *loopdetect.Config) string {
	k := cfg.Attributes
	var names, attrs []string
	for _, m := range k.ToolSpanNames {
		if m.Prefix != "" {
			names = append(names, m.Prefix+"*")
		} else {
			names = append(names, m.Name)
		}
	}
	for _, m := range k.ToolCall {
		if m.Value != "" {
			attrs = append(attrs, m.Key+"="+m.Value)
		} else {
			attrs = append(attrs, m.Key)
		}
	}
	return fmt.Sprintf("loop_detect looked for span or log record names %s, or attributes %s (attributes.tool_span_names and attributes.tool_call in the config).",
		quoteAll(names), quoteAll(attrs))
}

func logSessionKeys(cfg *loopdetect.Config) []string {
	if len(cfg.Session.Keys) > 0 {
		return cfg.Session.Keys
	}
	return []string{"session.id", "gen_ai.conversation.id"}
}

func quoteAll(s []string) string {
	if len(s) == 0 {
		return "(none configured)"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
