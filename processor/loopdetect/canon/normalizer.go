package canon

import (
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// NormalizerVersion is written into every event: a changed normalizer
// changes signatures and could otherwise look like a recovery or an incident.
const NormalizerVersion = "args-v1"

// defaultVolatileArgKeys are argument keys that change on every call
// without changing what the call does. Page tokens, cursors, offsets, paths,
// queries and scopes are meaning and are not here.
var defaultVolatileArgKeys = []string{
	"request_id", "req_id", "idempotency_key", "timestamp", "ts", "created_at", "updated_at",
	"seed", "random_seed", "nonce", "trace_id", "span_id", "parent_span_id", "tool_call_id",
	"call_id", "run_id", "parent_run_id", "langgraph_*", "checkpoint_*", "callbacks",
}

// defaultVolatileResultKeys are added to the argument keys when a result is
// normalized into a fingerprint.
var defaultVolatileResultKeys = []string{
	"pid", "session_id", "duration", "duration_ms", "elapsed", "elapsed_ms", "took", "took_ms",
	"latency_ms", "message_id", "msg_id", "date", "time", "started_at", "finished_at", "completed_at",
	"expires_at", "etag", "response_metadata", "usage_metadata",
	// What OpenClaw strips from repeated results: a per-call working
	// directory, run ids, receipts of a sent message.
	"cwd", "receipt_id", "receipt_timestamp", "sent_at", "received_at", "delivered_at",
	// A receipt object whole, at any depth ({"receipt": {"id": …, "ts":
	// …}}): its members are the delivery's own ids and times, and a bare
	// "id" elsewhere (a listed item's) is meaning, so the name that holds
	// them is the key.
	"receipt", "receipts",
}

// defaultTerminalKeys are result keys whose value tells an async task's state.
var defaultTerminalKeys = []string{"state", "status"}

// defaultTerminalValues are the states after which re-reading is a loop.
var defaultTerminalValues = []string{"complete", "completed", "succeeded", "success", "done", "failed", "finished", "cancelled", "canceled"}

// NormalizerConfig configures how arguments and results become digests.
type NormalizerConfig struct {
	// VolatileArgKeys are argument keys dropped at any depth; '*' suffix
	// matches a prefix. Default: request ids, timestamps, seeds, nonces,
	// trace/span ids, tool_call_id, run_id, langgraph_*, checkpoint_*.
	VolatileArgKeys []string `mapstructure:"volatile_arg_keys"`
	// VolatileResultKeys are dropped from results in addition. Default:
	// pid, session ids, durations, message ids, timestamps, receipts.
	VolatileResultKeys []string `mapstructure:"volatile_result_keys"`
	// ToolOverrides keeps or drops extra keys per tool name.
	ToolOverrides map[string]KeyOverride `mapstructure:"tool_overrides"`
	// TerminalKeys are the top-level result keys whose value may mark a
	// terminal async result. Default: state, status.
	TerminalKeys []string `mapstructure:"terminal_keys"`
	// TerminalValues are the values of those keys that do. Default:
	// complete, completed, succeeded, success, done, failed, finished,
	// cancelled, canceled.
	TerminalValues []string `mapstructure:"terminal_values"`
	// MaxCanonicalBytes caps the size canonicalized as JSON; larger values
	// are hashed as opaque bytes. Default 65536.
	MaxCanonicalBytes int `mapstructure:"max_canonical_bytes"`
	// UnknownToolMarkers recognise, case-insensitively, in a failed call's
	// error class or text, a call of a tool that does not exist. Default:
	// the frameworks' messages ("is not a valid tool", NoSuchToolError,
	// "unknown tool", …).
	UnknownToolMarkers []string `mapstructure:"unknown_tool_markers"`
}

// Validate reports a setting the normalizer cannot work with, naming its
// key and value; confmap.Validate puts the normalizer key in front.
func (c *NormalizerConfig) Validate() error {
	if c.MaxCanonicalBytes < 1 {
		return fmt.Errorf("max_canonical_bytes must be ≥ 1, got %d", c.MaxCanonicalBytes)
	}
	return nil
}

// KeyOverride keeps or drops extra keys for one tool.
type KeyOverride struct {
	// Keep lists keys that stay although the default denylist drops them.
	Keep []string `mapstructure:"keep"`
	// Drop lists keys dropped in addition to the defaults.
	Drop []string `mapstructure:"drop"`
}

// DefaultNormalizerConfig returns the documented defaults.
func DefaultNormalizerConfig() NormalizerConfig {
	return NormalizerConfig{
		VolatileArgKeys:    append([]string(nil), defaultVolatileArgKeys...),
		VolatileResultKeys: append([]string(nil), defaultVolatileResultKeys...),
		TerminalKeys:       append([]string(nil), defaultTerminalKeys...),
		TerminalValues:     append([]string(nil), defaultTerminalValues...),
		MaxCanonicalBytes:  64 << 10,
		UnknownToolMarkers: append([]string(nil), defaultUnknownToolMarkers...),
	}
}

// ArgsQuality says how the arguments behind a signature were read; the
// engine's ArgsQuality, which says how far the signature can be trusted,
// is made from it.
type ArgsQuality uint8

// The argument qualities.
const (
	// ArgsJSON: arguments parsed and canonicalized.
	ArgsJSON ArgsQuality = iota
	// ArgsOpaque: arguments present but not JSON; hashed as trimmed text.
	ArgsOpaque
	// ArgsOversized: arguments over the size cap; hashed as raw bytes.
	ArgsOversized
	// ArgsAbsent: no arguments recorded; the signature is the tool name only
	// and low-confidence.
	ArgsAbsent
)

// Normalizer turns tool arguments and results into digests. It is safe for
// concurrent use.
type Normalizer struct {
	maxBytes    int
	argDeny     *keySet
	resultDeny  *keySet
	perTool     map[string]*toolKeySets
	terminal    *terminalMatcher
	unknownTool []string
}

type toolKeySets struct {
	args, result *keySet
}

// NewNormalizer builds a Normalizer from cfg.
func NewNormalizer(cfg NormalizerConfig) *Normalizer {
	term := newTerminalMatcher(cfg.TerminalKeys, cfg.TerminalValues)
	n := &Normalizer{
		maxBytes:   cfg.MaxCanonicalBytes,
		argDeny:    newKeySet(cfg.VolatileArgKeys),
		resultDeny: newKeySetFor(append(append([]string(nil), cfg.VolatileArgKeys...), cfg.VolatileResultKeys...), term),
		terminal:   term,
	}
	if n.maxBytes <= 0 {
		n.maxBytes = 64 << 10
	}
	for _, m := range cfg.UnknownToolMarkers {
		if m != "" {
			n.unknownTool = append(n.unknownTool, strings.ToLower(m))
		}
	}
	for tool, o := range cfg.ToolOverrides {
		if n.perTool == nil {
			n.perTool = make(map[string]*toolKeySets)
		}
		n.perTool[tool] = &toolKeySets{
			args:   newKeySet(override(cfg.VolatileArgKeys, o)),
			result: newKeySetFor(override(append(append([]string(nil), cfg.VolatileArgKeys...), cfg.VolatileResultKeys...), o), term),
		}
	}
	return n
}

func override(base []string, o KeyOverride) []string {
	keep := newKeySet(o.Keep)
	out := make([]string, 0, len(base)+len(o.Drop))
	for _, k := range base {
		if !keep.match(strings.TrimSuffix(k, "*")) {
			out = append(out, k)
		}
	}
	return append(out, o.Drop...)
}

func (n *Normalizer) sets(tool string) (args, result *keySet) {
	if n.perTool != nil {
		if ts, ok := n.perTool[tool]; ok {
			return ts.args, ts.result
		}
	}
	return n.argDeny, n.resultDeny
}

const (
	sigSeed      = 0x5a17c0de00000001
	nameOnlySeed = 0x5a17c0de00000002
)

// Signature digests a tool name and its arguments. present=false (no
// arguments recorded) yields a name-only, low-confidence signature.
func (n *Normalizer) Signature(tool, args string, present bool) (uint64, ArgsQuality) {
	th := xxhash.Sum64String(tool)
	if !present {
		return hash64.Mix(th ^ nameOnlySeed), ArgsAbsent
	}
	if len(args) > n.maxBytes {
		return hash64.Mix(th^sigSeed) ^ hash64.Mix(xxhash.Sum64String(args)^hash64.TagOpaque), ArgsOversized
	}
	deny, _ := n.sets(tool)
	r := canonicalize(args, deny, nil, true, "")
	q := ArgsJSON
	if r.opaque {
		q = ArgsOpaque
	}
	return hash64.Mix(th^sigSeed) ^ r.digest, q
}

// SignatureMember is Signature, with the raw JSON value of args'
// top-level member want, read in the same pass: a shell tool's command, a
// status tool's job id (the engine's WaitReader.Want). The digest is
// Signature's.
func (n *Normalizer) SignatureMember(tool, args string, present bool, want string) (uint64, ArgsQuality, string, bool) {
	if !present || len(args) > n.maxBytes || want == "" {
		d, q := n.Signature(tool, args, present)
		return d, q, "", false
	}
	deny, _ := n.sets(tool)
	r := canonicalize(args, deny, nil, true, want)
	q := ArgsJSON
	if r.opaque {
		q = ArgsOpaque
	}
	var member string
	if r.found {
		member = strings.TrimSpace(args)[r.member[0]:r.member[1]]
	}
	return hash64.Mix(xxhash.Sum64String(tool)^sigSeed) ^ r.digest, q, member, r.found
}

// ResultFingerprint is what a tool's result says about progress.
type ResultFingerprint struct {
	// Digest of the normalized result.
	Digest uint64
	// Terminal is set when the result reports a final state.
	Terminal bool
	// Opaque is set when the result was not JSON.
	Opaque bool
}

// Result digests a tool result with the result-side volatile keys removed
// and wrappers (a serialized LangChain ToolMessage) unwrapped.
func (n *Normalizer) Result(tool, result string) ResultFingerprint {
	if len(result) > n.maxBytes {
		return ResultFingerprint{Digest: hash64.Mix(xxhash.Sum64String(result) ^ hash64.TagOpaque), Opaque: true}
	}
	_, deny := n.sets(tool)
	r := canonicalize(result, deny, n.terminal, false, "kwargs")
	if c, ok := toolMessageContent(result, r); ok {
		r = canonicalize(c, deny, n.terminal, false, "")
	}
	return ResultFingerprint{Digest: r.digest, Terminal: r.terminal, Opaque: r.opaque}
}

// toolMessageContent finds the content of a serialized LangChain
// ToolMessage ({"lc":1,"kwargs":{"content":…,"tool_call_id":…}}), whose
// ids change on every call while the content may not. r is the canonical
// pass over the whole result, which recorded its top-level kwargs member:
// the ToolMessage marker is only looked for in a result that has one.
func toolMessageContent(s string, r canonResult) (string, bool) {
	if !r.found {
		return "", false
	}
	t := strings.TrimSpace(s)
	if !containsToolMessage(t) {
		return "", false
	}
	return memberRaw(t[r.member[0]:r.member[1]], "content")
}

// containsToolMessage is strings.Contains(t, `"ToolMessage"`), found
// through the rare 'M' with IndexByte: on every tool result, the generic
// search for a needle starting with '"' cost a fifth of the digest.
func containsToolMessage(t string) bool {
	const marker = `"ToolMessage"`
	const m = 5 // index of 'M' in marker
	for i := 0; ; {
		j := strings.IndexByte(t[i:], 'M')
		if j < 0 {
			return false
		}
		if k := i + j - m; k >= 0 && strings.HasPrefix(t[k:], marker) {
			return true
		}
		i += j + 1
	}
}

// memberRaw returns the raw JSON text of a top-level member of an object:
// the first member of that name whose value parses, whatever follows it.
func memberRaw(obj, name string) (string, bool) {
	pos, c := nextByte(obj, 0)
	if c != '{' {
		return "", false
	}
	var h canonHasher // set field by field: see canonicalize
	h.s, h.pos, h.want = obj, pos, name
	_, _ = h.container(0, nil) // an error after the member does not matter
	return obj[h.member[0]:h.member[1]], h.found
}
