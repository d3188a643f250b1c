// Package engine is loop_detect's detection engine: tool calls in, verdicts
// and state transitions out. It has no collector or pdata dependency and
// takes the time from its caller, so the collector processor, the in-process
// SDK span processor and offline replay all run the same code.
package engine

import (
	"fmt"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/target"
)

// State is a session's verdict.
type State uint8

// The states. The engine decides them in the order of verdictOrder (decide.go).
const (
	StateWorking State = iota
	StateWaiting
	StateRetrying
	StateStuck
	StateUncertain
)

var stateNames = [...]string{"working", "waiting", "retrying", "stuck", "uncertain"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// Reason is the reason code behind a state.
type Reason uint8

// The reason codes. Their strings are part of the event contract.
const (
	ReasonNone Reason = iota
	// ReasonNoLoop: nothing loop-shaped in the window (working).
	ReasonNoLoop
	// ReasonProgress: loop-shaped, but the progress fingerprint changed (working).
	ReasonProgress
	// ReasonLease: a valid wait lease covers the repetition (waiting).
	ReasonLease
	// ReasonRetryPolicy: retryable failures inside the retry policy (retrying).
	ReasonRetryPolicy
	// ReasonPeriodicLoop: a cycle of period 1..max repeated with an unchanged fingerprint (stuck).
	ReasonPeriodicLoop
	// ReasonUnchangedResult: the same call returned an identical result twice in a row (stuck).
	ReasonUnchangedResult
	// ReasonTerminalReread: a terminal result was read again with the same signature (stuck).
	ReasonTerminalReread
	// ReasonFrequentIdentical: ≥ N identical calls in the last M (stuck).
	ReasonFrequentIdentical
	// ReasonBackstop: the session outlived the backstop limit (stuck).
	ReasonBackstop
	// ReasonNonRetryableError: identical calls failing with a non-retryable error (stuck).
	ReasonNonRetryableError
	// ReasonBackoffCollapsed: retries came faster than the policy's backoff (stuck).
	ReasonBackoffCollapsed
	// ReasonRetryExhausted: more attempts than the policy allows (stuck).
	ReasonRetryExhausted
	// ReasonMissingFingerprint: loop-shaped but no progress fingerprint (uncertain).
	ReasonMissingFingerprint
	// ReasonNameOnly: repetition of name-only (argument-less) signatures (uncertain).
	ReasonNameOnly
	// ReasonLongCycle: a cycle longer than max_period repeated with unchanged results (stuck).
	ReasonLongCycle
	// ReasonCycleWithoutResults: a short cycle repeated many times with arguments but no results (stuck).
	ReasonCycleWithoutResults
	// ReasonFailureStreak: one tool failing with one error class again and again, whatever its arguments (stuck).
	ReasonFailureStreak
	// ReasonUnknownTool: calls of a tool that does not exist, again and again (stuck).
	ReasonUnknownTool
	// ReasonImplicitLease: a poll that itself waits, on a job its result
	// reports pending, covers the repetition (waiting).
	ReasonImplicitLease
)

var reasonNames = [...]string{
	"", "no_loop", "progress", "lease", "retry_policy", "periodic_loop", "unchanged_result",
	"terminal_reread", "frequent_identical", "backstop", "non_retryable_error", "backoff_collapsed",
	"retry_exhausted", "missing_fingerprint", "name_only", "long_cycle", "cycle_without_results",
	"failure_streak", "unknown_tool", "implicit_lease",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", r)
}

// deterministic reasons are never delayed by hysteresis.
func (r Reason) deterministic() bool {
	switch r {
	case ReasonTerminalReread, ReasonNonRetryableError, ReasonBackstop, ReasonRetryExhausted, ReasonUnknownTool:
		return true
	}
	return false
}

// MarshalText writes the reason code, as configurations spell it.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a reason code (kill.reasons).
func (r *Reason) UnmarshalText(text []byte) error {
	parsed, ok := ParseReason(string(text))
	if !ok {
		return fmt.Errorf("unknown reason %q", text)
	}
	*r = parsed
	return nil
}

// ParseReason maps a reason code back to its Reason.
func ParseReason(s string) (Reason, bool) {
	for i, n := range reasonNames {
		if n == s && i != 0 {
			return Reason(i), true
		}
	}
	return ReasonNone, false
}

// FingerprintSource says where a call's progress fingerprint came from.
type FingerprintSource uint8

// The fingerprint sources.
const (
	// FingerprintMissing: nothing safe to compare; never read as "no progress".
	FingerprintMissing FingerprintSource = iota
	// FingerprintAttribute: the agent's own progress fingerprint attribute.
	FingerprintAttribute
	// FingerprintResult: the digest of the normalized tool result.
	FingerprintResult
	// FingerprintError: a failed call: its error class, with its error
	// text and its result masked when the caller normalized them
	// (FailureDigest).
	FingerprintError
)

var fpSourceNames = [...]string{"missing", "attribute", "result", "error"}

func (f FingerprintSource) String() string {
	if int(f) < len(fpSourceNames) {
		return fpSourceNames[f]
	}
	return "unknown"
}

// Trigger says what caused a transition.
type Trigger uint8

// The triggers.
const (
	// TriggerCall: a tool call arrived.
	TriggerCall Trigger = iota
	// TriggerTick: a timer (lease expiry, backstop).
	TriggerTick
)

func (t Trigger) String() string {
	if t == TriggerTick {
		return "tick"
	}
	return "call"
}

// RetryPolicy is the policy repeated failures are held to.
type RetryPolicy struct {
	// InitialInterval is the expected gap before the second attempt.
	// Default 2s.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// BackoffRate multiplies the gap for each further attempt. Default 2.
	BackoffRate float64 `mapstructure:"backoff_rate"`
	// MaxAttempts bounds the attempts, the first included. Default 5.
	MaxAttempts int `mapstructure:"max_attempts"`
}

// Lease is an agent's declared wait: honoured only with owner and deadline.
type Lease struct {
	// Owner names who the agent waits for.
	Owner string
	// Deadline is when the wait ends (zero: none).
	Deadline time.Time
	// Reason is free text, informational only.
	Reason string
}

// ToolCall is one tool invocation as the engine sees it: digests and
// facts, never raw arguments or results. Strings may alias caller memory;
// the engine copies what it keeps.
type ToolCall struct {
	// Session is the session key.
	Session string
	// SessionSource names what the session key came from.
	SessionSource string
	// TraceID, SpanID and ParentSpanID identify the span.
	TraceID      [16]byte
	SpanID       [8]byte
	ParentSpanID [8]byte
	// CallID is the framework's tool call id ("" when none).
	CallID string
	// Start and End are the span's times.
	Start, End time.Time
	// Tool is the tool name.
	Tool string
	// Signature is the action signature; Args says how it was made.
	Signature Digest
	Args      ArgsQuality
	// Fingerprint is the progress fingerprint, from FingerprintSource.
	Fingerprint       Digest
	FingerprintSource FingerprintSource
	// Terminal is set when the result reports a final state.
	Terminal bool
	// Failed is set for an errored call; ErrorClass names the error.
	Failed     bool
	ErrorClass string
	// ErrorText is the failure's text as explanations quote it, masked
	// (canon's Normalizer.ShownError); "" when none was recorded.
	ErrorText string
	// UnknownTool marks a failure because the tool does not exist
	// (canon's Normalizer.Failure recognises the frameworks' messages).
	UnknownTool bool
	// Attempt is the retry attempt from the span (0: unknown).
	Attempt int
	// Policy is the retry policy from the span (zero: the configured default).
	Policy RetryPolicy
	// Lease is the wait lease from the span, if any.
	Lease Lease
	// Wait is the job the call polls, when it waits itself or is a status
	// tool's (WaitReader); the engine grants it an implicit lease while the
	// job is pending.
	Wait Wait
	// Agent is the agent name; Client the recognised client shape.
	Agent  string
	Client string
	// Target identifies the agent process.
	Target target.Process
}

// LowConfidence reports a name-only signature.
func (c *ToolCall) LowConfidence() bool { return c.Args == ArgsAbsent }

// Transition is one change of a session's state (or a kill escalation of
// the same stuck loop).
type Transition struct {
	// ID is stable for (session, sequence).
	ID string
	// Seq counts the session's transitions from 1.
	Seq int64
	// Session, SessionSource and TraceID place the transition.
	Session       string
	SessionSource string
	TraceID       [16]byte
	// ParentSpanID is the parent of the last tool span, for synthetic spans.
	ParentSpanID [8]byte
	// From and To are the states; Reason explains To.
	From, To State
	Reason   Reason
	// Trigger says whether a call or a timer caused it.
	Trigger Trigger
	// Period and Repetitions describe the cycle (0 when none).
	Period, Repetitions int
	// Window is how many calls the decision looked at.
	Window int
	// CallIndex is the 1-based index of the triggering call (the last call
	// for timer transitions) in start-time order after deduplication.
	CallIndex int64
	// CycleTools names the cycle's tools in order.
	CycleTools []string
	// Signatures and Fingerprint are keyed digests of the evidence.
	Signatures        []string
	Fingerprint       string
	FingerprintSource FingerprintSource
	// LowConfidence marks name-only evidence.
	LowConfidence bool
	// FirstLoopSpanID is the loop's first call; TriggerSpanID the call that
	// caused the transition (zero for timer transitions).
	FirstLoopSpanID, TriggerSpanID [8]byte
	// DelayCalls and DelaySeconds measure from the loop's start to detection.
	DelayCalls   int64
	DelaySeconds float64
	// Kill asks the supervisor to stop the agent; DryRun marks a kill that
	// was decided but is only reported.
	Kill, DryRun bool
	// Explanation is the human text.
	Explanation string
	// DecidedAt is the engine's time of the decision.
	DecidedAt time.Time
	// Agent, Client and Target describe the agent.
	Agent, Client string
	Target        target.Process
	// TokensTotal is the model tokens the session's LLM calls used so far;
	// TokensLoop those since the stuck loop began (0 outside one, and when
	// the agent reports no usage).
	TokensTotal, TokensLoop int64
}
