// Package extract turns one span into an engine.ToolCall. It reads spans
// through the small Span interface, so the collector processor (pdata) and
// the in-process SDK span processor share one code path.
package extract

import (
	"encoding/binary"
	mbits "math/bits"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// Kind is the type of an attribute value.
type Kind uint8

// The value kinds.
const (
	KindString Kind = iota
	KindInt
	KindDouble
	KindBool
	// KindStructured is a map or slice, rendered as JSON in Str.
	KindStructured
)

// Value is one attribute value.
type Value struct {
	Kind  Kind
	Str   string
	Int   int64
	Float float64
	Bool  bool
	// Truncated marks a structured value cut at the adapter's depth or
	// size bound: Str holds the text rendered so far, and the value takes
	// the oversized path whatever normalizer.max_canonical_bytes says.
	Truncated bool
}

// Text renders the value as text.
func (v Value) Text() string {
	switch v.Kind {
	case KindInt:
		return strconv.FormatInt(v.Int, 10)
	case KindDouble:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.Bool)
	}
	return v.Str
}

// Number reads the value as a number (numeric strings included).
func (v Value) Number() (float64, bool) {
	switch v.Kind {
	case KindInt:
		return float64(v.Int), true
	case KindDouble:
		return v.Float, true
	case KindString:
		f, err := strconv.ParseFloat(strings.TrimSpace(v.Str), 64)
		return f, err == nil
	}
	return 0, false
}

// Span is read access to one finished span and its resource.
type Span interface {
	Name() string
	Attr(key string) (Value, bool)
	ResourceAttr(key string) (Value, bool)
	TraceID() [16]byte
	SpanID() [8]byte
	ParentSpanID() [8]byte
	Start() time.Time
	End() time.Time
	// Status reports an ERROR status and its description.
	Status() (bool, string)
	EventCount() int
	EventName(i int) string
	EventAttr(i int, key string) (Value, bool)
}

// Extractor holds the compiled key lists. It is safe for concurrent use.
type Extractor struct {
	keys Keys
	norm *canon.Normalizer
	// waits recognises polls (nil: implicit waits off).
	waits *engine.WaitReader
	skip  map[string]struct{}
	tab   attrTable
	slots roleSlots
}

// New compiles keys and the normalizer into an Extractor.
func New(keys Keys, norm *canon.Normalizer) *Extractor {
	x := &Extractor{keys: keys, norm: norm, skip: make(map[string]struct{}), waits: engine.NewWaitReader(keys.Waits)}
	for _, n := range keys.SkipToolNames {
		x.skip[n] = struct{}{}
	}
	x.tab, x.slots = compileSlots(&x.keys)
	return x
}

// skipTool reports whether tool is one of SkipToolNames. The list is
// usually a name or two: compared in turn, most tool names differ at once
// in length, cheaper than hashing them.
func (x *Extractor) skipTool(tool string) bool {
	if len(x.keys.SkipToolNames) > 8 {
		_, skip := x.skip[tool]
		return skip
	}
	for _, n := range x.keys.SkipToolNames {
		if n == tool {
			return true
		}
	}
	return false
}

// Keys returns the key lists the extractor uses.
func (x *Extractor) Keys() Keys { return x.keys }

// Outcome counts what degraded while extracting one call.
type Outcome struct {
	// Malformed: arguments or result present but not parseable JSON.
	Malformed bool
	// Oversized: arguments over the canonicalization cap.
	Oversized bool
	// BadEvidence: an evidence attribute of the wrong type or format.
	BadEvidence bool
}

// Scratch is per-call working memory, so the hot path allocates nothing.
// Session strings in the ToolCall may point into it.
type Scratch struct {
	traceHex [32]byte
	// hexOf is the trace id traceHex spells, when hexOK: the spans of one
	// trace mostly come together.
	hexOf [16]byte
	hexOK bool
	// spanHex spells a subagent's session, its span's id (spanSession).
	spanHex [16]byte
	attrs   AttrSink
	res     resourceMemo
}

// traceSession is the session key of trace id tid, its hex text; it points
// into sc.
func (sc *Scratch) traceSession(tid [16]byte) string {
	if !sc.hexOK || sc.hexOf != tid {
		putHex(sc.traceHex[:], tid[:])
		sc.hexOf, sc.hexOK = tid, true
	}
	return unsafe.String(&sc.traceHex[0], len(sc.traceHex))
}

// spanSession is the session key of a subagent whose calls are under
// span id, its hex text; it points into sc.
func (sc *Scratch) spanSession(id [8]byte) string {
	putHex(sc.spanHex[:], id[:])
	return unsafe.String(&sc.spanHex[0], len(sc.spanHex))
}

// putHex spells src, whole words of 4 bytes, into dst in lower-case hex.
// Four bytes' digits go to a word: a byte at a time was nearly half of
// what a model span of an untracked session costs per trace.
func putHex(dst, src []byte) {
	for i := 0; i+4 <= len(src); i += 4 {
		w := uint64(hexPairs[src[i]]) | uint64(hexPairs[src[i+1]])<<16 |
			uint64(hexPairs[src[i+2]])<<32 | uint64(hexPairs[src[i+3]])<<48
		binary.LittleEndian.PutUint64(dst[2*i:], w)
	}
}

// hexPairs holds each byte's two lower-case hex digits, the first in the
// low byte.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for b := range t {
		t[b] = uint16(digits[b>>4]) | uint16(digits[b&0xf])<<8
	}
	return t
}()

// Classify reports whether s is a tool call and which client shape matched:
// span names first, then the attribute matches, then ClientHints refine the
// client name. Spans that are no tool call cost only these lookups.
func Classify[S Span](x *Extractor, s S) (string, bool) {
	client, ok := classify(x, s)
	if !ok {
		return "", false
	}
	for i := range x.keys.ClientHints {
		h := &x.keys.ClientHints[i]
		if v, found := s.Attr(h.Key); found && h.matchValue(v) {
			return h.Client, true
		}
	}
	return client, true
}

func classify[S Span](x *Extractor, s S) (string, bool) {
	if declared, ok := declaredTool(x, s); ok && !declared {
		return "", false
	}
	return classifyBy(x, s, func(i int) (Value, bool) { return s.Attr(x.keys.ToolCall[i].Key) })
}

// classifyBy is classify's tests after the declared operation: span names
// first, then the tool_call matches, whose values attr reads.
func classifyBy[S Span](x *Extractor, s S, attr func(i int) (Value, bool)) (string, bool) {
	name := s.Name()
	for i := range x.keys.ToolSpanNames {
		if m := &x.keys.ToolSpanNames[i]; m.matchName(name) {
			return m.Client, true
		}
	}
	for i := range x.keys.ToolCall {
		m := &x.keys.ToolCall[i]
		if v, ok := attr(i); ok && v.Kind == KindString && EqualFold(v.Str, m.Value) {
			return m.Client, true
		}
	}
	return "", false
}

// declaredTool reads the span's declared operation: the first tool_call key
// (gen_ai.operation.name by default). When present it is authoritative — a
// span declared "chat" is no tool call whatever its name or other
// attributes — and it makes a non-tool span cost one attribute lookup.
// ok is false when the span declares nothing.
func declaredTool[S Span](x *Extractor, s S) (declared, ok bool) {
	if len(x.keys.ToolCall) == 0 {
		return false, false
	}
	key := x.keys.ToolCall[0].Key
	v, found := s.Attr(key)
	if !found {
		return false, false
	}
	return x.keys.declaresTool(key, v), true
}

// clientHint is Classify's ClientHints step (keep the two alike) over a's
// slots: Extract reads the hints from its one pass over the attributes.
func clientHint[S Span](x *Extractor, a *attrs[S], client string) string {
	present := ^uint64(0) // without the one pass: ask every hint's key
	if a.sink != nil {
		// With it every slot fits maxSlots, and the hints whose keys the
		// span lacks are passed over at once.
		present = a.sink.seen & x.slots.hintMask
		if hs := x.slots.hints; x.slots.hintsOrdered {
			// Slots rising with the list: the hints of the slots present,
			// taken by ascending slot, come in the list's order.
			for p := present; p != 0; p &= p - 1 {
				sl := int32(mbits.TrailingZeros64(p))
				for i := int(x.slots.hintAt[sl]); i < len(hs) && hs[i] == sl; i++ {
					if v, found := a.get(sl); found && x.keys.ClientHints[i].matchValue(v) {
						return x.keys.ClientHints[i].Client
					}
				}
			}
			return client
		}
	}
	for i := range x.keys.ClientHints {
		sl := x.slots.hints[i]
		if sl < maxSlots && present&(1<<uint(sl)) == 0 {
			continue
		}
		if v, found := a.get(sl); found && x.keys.ClientHints[i].matchValue(v) {
			return x.keys.ClientHints[i].Client
		}
	}
	return client
}

func skipped[S Span](x *Extractor, a *attrs[S]) bool {
	if a.none(x.slots.skipMask) {
		return false
	}
	for i := range x.keys.SkipSpans {
		m := &x.keys.SkipSpans[i]
		if v, ok := a.get(x.slots.skip[i]); ok && m.matchValue(v) {
			return true
		}
	}
	return false
}

// Extract fills c from s and reports whether s is a tool call.
func Extract[S Span](x *Extractor, s S, sc *Scratch, c *engine.ToolCall) (bool, Outcome) {
	declared, ok := declaredTool(x, s)
	if ok && !declared {
		return false, Outcome{}
	}
	return extract(x, s, sc, c, declared)
}

// ExtractDeclared is Extract for a span its caller has seen declare a tool
// call: the first tool_call key's first occurrence is a string equal (as
// EqualFold) to one of that key's tool_call values, as
// pdataspan.Prefilter's screening reports. That look-up is not made again.
func ExtractDeclared[S Span](x *Extractor, s S, sc *Scratch, c *engine.ToolCall) (bool, Outcome) {
	return extract(x, s, sc, c, true)
}

// extract is Extract once the declared operation is known: declared, or
// none declared.
//
//nolint:funlen // The per-span hot path: split into three named steps (identify, signArgs, fingerprint; generic, not inlined) it was not shown to be as fast (BenchmarkSpan/op=extract-tool, old/new interleaved on a loaded machine: +70 % at p=0.03 over 15 runs, no difference at p=0.90 over 20 with its fastest runs slower), so it stays one body.
func extract[S Span](x *Extractor, s S, sc *Scratch, c *engine.ToolCall, declared bool) (bool, Outcome) {
	var out Outcome
	var a attrs[S]
	var client string
	var ok bool
	if declared && x.slots.toolCall != nil {
		// A tool call whatever else it has: its one pass over the
		// attributes comes first and answers classify's look-ups too.
		a = newAttrs(x, s, sc)
		client, ok = classifyBy(x, s, func(i int) (Value, bool) { return a.get(x.slots.toolCall[i]) })
	} else {
		// Classify, its ClientHints step read from the one pass below.
		client, ok = classifyBy(x, s, func(i int) (Value, bool) { return s.Attr(x.keys.ToolCall[i].Key) })
		if ok {
			a = newAttrs(x, s, sc)
		}
	}
	if !ok {
		return false, out
	}
	*c = engine.ToolCall{Client: clientHint(x, &a, client)}
	c.Tool = toolName(x, &a)
	if x.skipTool(c.Tool) || skipped(x, &a) {
		return false, out
	}
	c.TraceID, c.SpanID, c.ParentSpanID = s.TraceID(), s.SpanID(), s.ParentSpanID()
	c.Start, c.End = s.Start(), s.End()

	res := sc.resource(x)
	if text, k, ok := a.firstTextOrResource(&x.slots.session, res.sessionMemo()); ok && text != "" {
		c.Session, c.SessionSource = text, k
	} else {
		c.Session, c.SessionSource = sc.traceSession(c.TraceID), "trace_id"
	}
	if len(x.keys.SubagentSession) > 0 {
		if id, key, ok := subagentSession(x, s, c.Client); ok {
			c.Session, c.SessionSource = id, key
		}
	}
	if text, _, ok := a.firstTextOrResource(&x.slots.agent, res.agentMemo()); ok {
		c.Agent = text
	}
	if c.Agent != "" && len(x.keys.SubagentSpans) > 0 && x.subagentSpan(s.Name(), c.Agent) && c.ParentSpanID != ([8]byte{}) {
		c.Session, c.SessionSource = sc.spanSession(c.ParentSpanID), "parent_span_id"
	}
	if res != nil && res.hasTarget {
		c.Target = res.target // most spans: the shared resource was read
	} else {
		c.Target = processOf(s, res)
	}
	if v, _, ok := a.firstSlot(&x.slots.callID); ok {
		if id := v.Text(); !x.ignoredCallID(id) {
			c.CallID = id
		}
	}

	args, argsOK, argsCut := lookupContent(x, &a, &x.slots.args, x.keys.ArgumentEvents)
	if argsOK && !argsCut {
		args = unwrapArgs(args)
	}
	// One check for most calls: a poll's tool is a shell or a status tool,
	// whose command or job id the canonical pass finds.
	want, poll := x.waits.Want(c.Tool)
	var member string
	var hasMember bool
	var sig uint64
	q := canon.ArgsOversized
	switch {
	case argsCut:
		sig = x.norm.OversizedSignature(c.Tool, args)
	case poll:
		sig, q, member, hasMember = x.norm.SignatureMember(c.Tool, args, argsOK, want)
	default:
		sig, q = x.norm.Signature(c.Tool, args, argsOK)
	}
	c.Signature, c.Args = engine.Digest(sig), argsQuality[q]
	switch c.Args {
	case engine.ArgsOpaque:
		out.Malformed = looksLikeJSON(args)
	case engine.ArgsOversized:
		out.Oversized = true
	}

	result, resultOK, resultCut := lookupContent(x, &a, &x.slots.result, x.keys.ResultEvents)
	if resultOK && !resultCut {
		result = dropNudge(unwrapResult(result))
		if len(x.keys.ResultDropLines) > 0 {
			result = x.dropResultLines(c.Client, result)
		}
	}
	var errText string
	c.Failed, c.ErrorClass, errText = failure(x, &a, result, resultOK)

	var fp Value
	var hasFP bool
	if !a.none(x.slots.fingerprintMask) {
		fp, hasFP = a.get(x.slots.fingerprint)
	}
	if hasFP && fp.Text() != "" {
		c.Fingerprint, c.FingerprintSource = engine.Digest(xxhash.Sum64String(fp.Text())), engine.FingerprintAttribute
	} else if c.Failed {
		// The result of a failed call is evidence too: many agents put the
		// error in the tool's output and only "failed" in the status.
		var failedResult string
		if resultOK {
			failedResult = result
		}
		f := x.norm.Failure(c.ErrorClass, errText, failedResult)
		c.Fingerprint, c.FingerprintSource, c.UnknownTool = engine.FailureDigest(c.ErrorClass, f.Text), engine.FingerprintError, f.UnknownTool
		c.ErrorText = x.norm.ShownError(errText, failedResult)
	} else if resultOK {
		var r canon.ResultFingerprint
		if resultCut {
			r = x.norm.OversizedResult(result)
		} else {
			r = x.norm.Result(c.Tool, result)
		}
		c.Fingerprint, c.FingerprintSource, c.Terminal = engine.Digest(r.Digest), engine.FingerprintResult, r.Terminal
		// Results are often plain text ("[main 1a2b] commit"): only
		// malformed arguments, which are JSON by contract, are counted.
	}
	// A shell call whose JSON arguments have no command member, like any
	// other call, goes no further.
	if poll && argsOK && !argsCut && (hasMember || c.Args != engine.ArgsJSON) {
		c.Wait = x.waits.Read(&engine.PollCall{
			Tool: c.Tool, Args: args, ArgsJSON: c.Args == engine.ArgsJSON, Member: member, HasMember: hasMember,
			Result: result, HasResult: resultOK && !resultCut, Failed: c.Failed,
		})
	}
	if !evidence(x, &a, c) {
		out.BadEvidence = true
	}
	return true, out
}

// argsQuality is the engine's trust in a signature by how canon read its
// arguments.
var argsQuality = [...]engine.ArgsQuality{
	canon.ArgsJSON:      engine.ArgsJSON,
	canon.ArgsOpaque:    engine.ArgsOpaque,
	canon.ArgsOversized: engine.ArgsOversized,
	canon.ArgsAbsent:    engine.ArgsAbsent,
}

func looksLikeJSON(s string) bool {
	t := strings.TrimSpace(s)
	return t != "" && (t[0] == '{' || t[0] == '[')
}

// dropResultLines is result without the lines that client's
// ResultDropLines name.
func (x *Extractor) dropResultLines(client, result string) string {
	for i := range x.keys.ResultDropLines {
		if l := &x.keys.ResultDropLines[i]; l.Client == client {
			return dropTextLines(result, l.Prefixes)
		}
	}
	return result
}

// subagentSession is the subagent's id a call of client carries in the
// key SubagentSession names for it, when it has one.
func subagentSession[S Span](x *Extractor, s S, client string) (id, key string, ok bool) {
	for i := range x.keys.SubagentSession {
		k := &x.keys.SubagentSession[i]
		if k.Client != client {
			continue
		}
		v, found := s.Attr(k.Key)
		if !found {
			return "", "", false
		}
		id = v.Text()
		if k.Path != "" {
			// Not found, raw is "", which is no JSON string either.
			raw, _ := atPath(id, k.Path)
			var isString bool
			if id, isString = jsonString(raw); !isString {
				return "", "", false
			}
		}
		return id, k.Key, id != ""
	}
	return "", "", false
}

// jsonString is the content of raw, a JSON string without escapes (ids
// have none); anything else is no id.
func jsonString(raw string) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || strings.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// subagentSpan reports whether a tool span named name, of agent, is one
// of a client's subagents' (SubagentSpans).
func (x *Extractor) subagentSpan(name, agent string) bool {
	for i := range x.keys.SubagentSpans {
		if sp := &x.keys.SubagentSpans[i]; sp.Name == name && sp.MainAgent != agent {
			return true
		}
	}
	return false
}

func (x *Extractor) ignoredCallID(id string) bool {
	if id == "" {
		return true
	}
	for _, ig := range x.keys.IgnoreCallIDs {
		if strings.EqualFold(id, ig) {
			return true
		}
	}
	return false
}

func toolName[S Span](x *Extractor, a *attrs[S]) string {
	if v, _, ok := a.firstSlot(&x.slots.toolName); ok && v.Text() != "" {
		return v.Text()
	}
	name := a.s.Name()
	for _, p := range x.keys.NamePrefixes {
		if rest, ok := strings.CutPrefix(name, p); ok {
			name = rest
			break
		}
	}
	for _, suf := range x.keys.NameSuffixes {
		if rest, ok := strings.CutSuffix(name, suf); ok {
			name = rest
			break
		}
	}
	return strings.TrimSpace(name)
}

// lookupContent reads arguments or results from span attributes, else from
// span events (Strands puts them in gen_ai.tool.message / gen_ai.choice, or
// in gen_ai.client.inference.operation.details messages) or a part of a
// JSON attribute (an EventKey without Event). Values listed as redacted
// count as absent.
func lookupContent[S Span](x *Extractor, a *attrs[S], slots *keyList, events []EventKey) (text string, found, truncated bool) {
	if v, sl, ok := a.firstSlot(slots); ok {
		if x.slots.mayRedact(sl) && x.redacted(a.t.keys[sl], v) {
			return "", false, false
		}
		return v.Text(), true, v.Truncated
	}
	if len(events) == 0 {
		return "", false, false
	}
	s := a.s
	n := s.EventCount()
	for _, ek := range events {
		if ek.Event == "" {
			// The span's own attribute, read at Path (Gemini CLI's
			// gen_ai.input.messages holds the whole request).
			if v, ok := s.Attr(ek.Key); ok && !v.Truncated {
				if raw, found := atPath(v.Text(), ek.Path); found {
					return dropLines(raw, ek.DropLines), true, false
				}
			}
			continue
		}
		for i := 0; i < n; i++ {
			if s.EventName(i) != ek.Event {
				continue
			}
			v, ok := s.EventAttr(i, ek.Key)
			if !ok {
				continue
			}
			if ek.Path == "" || v.Truncated {
				return v.Text(), true, v.Truncated
			}
			if raw, found := atPath(v.Text(), ek.Path); found {
				return raw, true, false
			}
		}
	}
	return "", false, false
}

func (x *Extractor) redacted(key string, v Value) bool {
	for i := range x.keys.Redacted {
		m := &x.keys.Redacted[i]
		if m.Key == key && m.matchValue(v) {
			return true
		}
	}
	return false
}

// indexBy is strings.Index(s, needle), searching for the needle's byte at
// index a ('p' in the wrapper keys): a generic search anchors on the
// needle's first byte, which may be among the commonest of the text
// searched (the leading quote of a JSON key, a lower-case letter).
func indexBy(s, needle string, a int) int {
	c := needle[a]
	for i := a; i < len(s); i++ {
		j := strings.IndexByte(s[i:], c)
		if j < 0 {
			return -1
		}
		i += j
		if start := i - a; start+len(needle) <= len(s) && s[start:start+len(needle)] == needle {
			return start
		}
	}
	return -1
}

// The keys of the wrappers unwrapArgs and unwrapResult take off: a wrapper
// has no other keys (onlyKeys), so its first key is one of these.
var (
	argsWrapperKeys   = []string{"input_str", "tags", "metadata", "inputs", "kwargs"}
	resultWrapperKeys = []string{"output", "kwargs"}
)

// unwrapArgs returns the real arguments inside OpenLLMetry's LangChain tool
// input ({"input_str","tags","metadata","inputs","kwargs"}): the engine's
// normalizer unwraps that wrapper only without "kwargs", and its tags
// ("seq:step:N") change on every LangGraph step.
func unwrapArgs(args string) string {
	if !firstKeyIn(args, argsWrapperKeys) {
		return args // no wrapper: most arguments, told at their first key
	}
	if indexBy(args, `"input_str"`, 3) < 0 && indexBy(args, `"inputs"`, 3) < 0 {
		return args
	}
	if onlyKeys(args, "inputs", argsWrapperKeys...) {
		if in, ok := member(args, "inputs"); ok && !isNullOrEmpty(in) {
			return in
		}
	}
	if onlyKeys(args, "input_str", argsWrapperKeys...) {
		if in, ok := member(args, "input_str"); ok {
			return in
		}
	}
	return args
}

// unwrapResult returns the tool output inside OpenLLMetry's LangChain tool
// output ({"output": …, "kwargs": …}); a serialized ToolMessage inside it is
// then unwrapped by the normalizer.
func unwrapResult(result string) string {
	if !firstKeyIn(result, resultWrapperKeys) {
		return result
	}
	if indexBy(result, `"output"`, 4) < 0 {
		return result
	}
	if onlyKeys(result, "output", resultWrapperKeys...) {
		if out, ok := member(result, "output"); ok {
			return out
		}
	}
	return result
}

// failure reports whether the call failed, its error class and its error
// text (the exception message, else the status description), which the
// normalizer masks, with the call's result, into the failure's evidence.
func failure[S Span](x *Extractor, a *attrs[S], result string, resultOK bool) (failed bool, class, text string) {
	s := a.s
	isErr, desc := s.Status()
	// The none tests, inlined, spare most spans the look-ups' calls.
	if !a.none(x.slots.errType.mask) {
		if v, _, ok := a.firstSlot(&x.slots.errType); ok {
			class, isErr = v.Text(), true
		}
	}
	if !a.none(x.slots.toolStat.mask) {
		if v, _, ok := a.firstSlot(&x.slots.toolStat); ok && strings.EqualFold(v.Text(), "error") {
			isErr = true
		}
	}
	for i := range x.keys.Failure {
		if a.none(x.slots.failureMask) {
			break
		}
		m := &x.keys.Failure[i]
		if v, ok := a.get(x.slots.failure[i]); ok && m.matchValue(v) {
			isErr = true
		}
	}
	if n := s.EventCount(); n > 0 {
		for i := 0; i < n; i++ {
			if s.EventName(i) == "exception" {
				isErr = true
				if class == "" {
					if v, ok := s.EventAttr(i, "exception.type"); ok {
						class = v.Text()
					}
				}
				if text == "" {
					if v, ok := s.EventAttr(i, "exception.message"); ok {
						text = v.Text()
					}
				}
			}
		}
	}
	if resultOK {
		for _, m := range x.keys.RetryMarkers {
			if strings.Contains(result, m) {
				isErr = true
				if class == "" {
					class = "retry_requested"
				}
				break // any further marker would change nothing
			}
		}
	}
	if !isErr {
		return false, "", ""
	}
	if class == "" && desc != "" {
		class, _, _ = strings.Cut(desc, ":")
		class = strings.TrimSpace(class)
	}
	switch {
	case text != "":
	case desc != "":
		// "bad_request: nope" says the same as exception bad_request "nope".
		if c, rest, ok := strings.Cut(desc, ":"); ok && strings.TrimSpace(c) == class {
			desc = rest
		}
		text = strings.TrimSpace(desc)
	}
	if class == "" {
		class = "error"
	}
	return true, class, text
}

// evidence reads the product's evidence attributes; false means one was
// present but unreadable (counted, then ignored).
func evidence[S Span](x *Extractor, a *attrs[S], c *engine.ToolCall) bool {
	ok := true
	k := &x.slots
	if a.none(k.evidenceMask) {
		return true // most spans: no evidence attribute at all
	}
	if v, found := a.get(k.attempt); found {
		if f, isNum := v.Number(); isNum && f >= 1 {
			c.Attempt = int(f)
		} else {
			ok = false
		}
	}
	if v, found := a.get(k.maxAtt); found {
		ma, isNum := v.Number()
		ii, _ := a.get(k.initial)
		br, _ := a.get(k.backoff)
		iiN, iiOK := ii.Number()
		brN, brOK := br.Number()
		if isNum && ma >= 1 {
			c.Policy = engine.RetryPolicy{MaxAttempts: int(ma), BackoffRate: 1, InitialInterval: 0}
			if iiOK && iiN >= 0 {
				c.Policy.InitialInterval = time.Duration(iiN * float64(time.Second))
			}
			if brOK && brN >= 1 {
				c.Policy.BackoffRate = brN
			}
		} else {
			ok = false
		}
	}
	owner, hasOwner := a.get(k.owner)
	deadline, hasDeadline := a.get(k.deadline)
	if hasOwner || hasDeadline {
		c.Lease.Owner = owner.Text()
		if hasDeadline {
			if t, good := parseDeadline(deadline); good {
				c.Lease.Deadline = t
			} else {
				ok = false
			}
		}
		if r, found := a.get(k.reason); found {
			c.Lease.Reason = r.Text()
		}
	}
	return ok
}

// parseDeadline reads RFC 3339 text or unix seconds (number or numeric text).
func parseDeadline(v Value) (time.Time, bool) {
	if v.Kind == KindString {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v.Str)); err == nil {
			return t, true
		}
	}
	if f, ok := v.Number(); ok && f > 0 {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), true
	}
	return time.Time{}, false
}
