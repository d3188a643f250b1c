package pdataspan

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Prefilter is extract.Classify's first test done on pdata directly: the
// tool span names, then one pass over the span's attributes looking for
// the tool-call matches. Most spans are no tool call, and for them this
// costs one scan of the attribute keys instead of a lookup and a Value per
// configured key. It may say "maybe" where Classify says no (the caller then
// runs Extract, which classifies again), never the other way round.
type Prefilter struct {
	names []extract.NameMatch
	keys  []extract.Match
	// lens marks the byte lengths of the keys, so most attributes are
	// rejected by their key length alone.
	lens [64]bool
	long bool // a key of 64 bytes or more
	// usage holds the token usage keys by byte length, for Usage.
	usage [64][]usageKey
	// skipBy holds the usage_skip keys by byte length, so Usage reads them
	// in its one pass; skip is the list itself, looked up key by key when a
	// key does not fit skipBy (skipLookup).
	skipBy     [64][]skipKey
	skip       []extract.Match
	skipLookup bool
	// opTools are the tool_call values of the declared operation's key
	// (the first tool_call key); opSkip are the usage_skip matches on that
	// key, which Screen reads anyway.
	opTools []opMatch
	opSkip  []opMatch
	// opLens says, for an operation of n < 32 bytes, whether some opTools
	// (opLenTool) or opSkip (opLenSkip) match can take it: most spans'
	// operations (chat, ...) are settled by their length alone.
	opLens [32]uint8
	// opKey is the declared operation's key, when declares.
	opKey    string
	declares bool
	// opFirst: opKey is the first tool_call key, the one
	// extract.ExtractDeclared takes as read.
	opFirst bool
}

// opMatch is a match on the declared operation with the byte lengths a
// value it takes can have: most operations differ in length, and are told
// apart without reading their text.
type opMatch struct {
	m      extract.Match
	lo, hi int
}

func newOpMatch(m extract.Match) opMatch {
	if m.Value != "" {
		if lo, hi, ok := engine.FoldLengths(m.Value); ok {
			return opMatch{m: m, lo: lo, hi: hi}
		}
	}
	return opMatch{m: m, hi: math.MaxInt}
}

// fits reports whether a value of n bytes may match.
func (o *opMatch) fits(n int) bool { return o.lo <= n && n <= o.hi }

// skipKey is one usage_skip key with its matches; bit marks its first
// occurrence in a span, the one Lookup finds.
type skipKey struct {
	key     string
	matches []extract.Match
	bit     uint64
}

// usageKey is one token usage key: which count it gives (input, output,
// total) and its rank in that list (the first listed wins).
type usageKey struct {
	key        string
	list, rank int
}

// NewPrefilter compiles the key lists an Extractor classifies with.
func NewPrefilter(k extract.Keys) *Prefilter {
	p := &Prefilter{names: k.ToolSpanNames}
	for list, keys := range [...][]string{k.InputTokens, k.OutputTokens, k.TotalTokens} {
		for rank, key := range keys {
			if n := len(key); n > 0 && n < len(p.usage) {
				p.usage[n] = append(p.usage[n], usageKey{key: key, list: list, rank: rank})
			}
		}
	}
	p.skip = k.UsageSkip
	p.compileSkip()
	for _, m := range k.ToolCall {
		if m.Key == "" {
			continue // an empty key is never looked up
		}
		p.keys = append(p.keys, m)
		if len(m.Key) < len(p.lens) {
			p.lens[len(m.Key)] = true
		} else {
			p.long = true
		}
	}
	if len(p.keys) > 0 {
		op := p.keys[0].Key
		p.opKey, p.declares, p.opFirst = op, true, k.ToolCall[0].Key == op
		for _, m := range p.keys {
			if m.Key == op {
				o := newOpMatch(m)
				if m.Value == "" {
					o.lo, o.hi = 0, 0 // EqualFold(str, "") takes "" alone
				}
				p.opTools = append(p.opTools, o)
			}
		}
		for _, m := range k.UsageSkip {
			if m.Key == op {
				p.opSkip = append(p.opSkip, newOpMatch(m))
			}
		}
		for n := range p.opLens {
			for i := range p.opTools {
				if p.opTools[i].fits(n) {
					p.opLens[n] |= opLenTool
				}
			}
			for i := range p.opSkip {
				if p.opSkip[i].fits(n) {
					p.opLens[n] |= opLenSkip
				}
			}
		}
	}
	return p
}

// The bits of Prefilter.opLens.
const (
	opLenTool uint8 = 1 << iota
	opLenSkip
)

// compileSkip lays the usage_skip keys out by length, or leaves them to
// look-ups should one not fit.
func (p *Prefilter) compileSkip() {
	var keys []string
	matches := map[string][]extract.Match{}
	for _, m := range p.skip {
		if m.Key == "" {
			continue // Lookup finds no empty key
		}
		if _, ok := matches[m.Key]; !ok {
			keys = append(keys, m.Key)
		}
		matches[m.Key] = append(matches[m.Key], m)
	}
	if len(keys) > 64 {
		p.skipLookup = true
		return
	}
	for i, k := range keys {
		if len(k) >= len(p.skipBy) {
			p.skipLookup = true
			p.skipBy = [64][]skipKey{}
			return
		}
		p.skipBy[len(k)] = append(p.skipBy[len(k)], skipKey{key: k, matches: matches[k], bit: 1 << uint(i)})
	}
}

// Screening is what Screen tells of a span before extraction.
type Screening struct {
	// MaybeTool is false only for a span extract.Classify does not take
	// for a tool call.
	MaybeTool bool
	// NoUsage is set for a span that is no tool call and whose declared
	// operation is a usage_skip match: Usage would report nothing for it,
	// so it need not be called.
	NoUsage bool
	// Declared is set for a span that declares a tool call as
	// extract.ExtractDeclared requires (its first tool_call key holds one
	// of that key's tool_call values): extracting it, the caller need not
	// look the operation up again.
	Declared bool
}

// Screen reads the span's declared operation, the one look-up most model
// and agent spans cost, and what it settles.
func (p *Prefilter) Screen(span ptrace.Span) Screening {
	// The declared operation decides alone, as in extract.Classify.
	if p.declares {
		if v, ok := span.Attributes().Get(p.opKey); ok {
			if v.Type() != pcommon.ValueTypeStr {
				return Screening{MaybeTool: true} // rendered as text by Value: leave it to Classify
			}
			str := v.Str()
			fit := opLenTool | opLenSkip
			if len(str) < len(p.opLens) {
				fit = p.opLens[len(str)]
			}
			if fit&opLenTool != 0 {
				for i := range p.opTools {
					o := &p.opTools[i]
					if o.fits(len(str)) && (str == o.m.Value || !extract.FoldMismatch(str, o.m.Value) && strings.EqualFold(str, o.m.Value)) {
						return Screening{MaybeTool: true, Declared: p.opFirst}
					}
				}
			}
			// Usage looks the key up as Get does (the first occurrence).
			if fit&opLenSkip != 0 {
				for i := range p.opSkip {
					if o := &p.opSkip[i]; o.fits(len(str)) && o.m.MatchesString(str) {
						return Screening{NoUsage: true}
					}
				}
			}
			return Screening{}
		}
	}
	return Screening{MaybeTool: p.maybeToolUndeclared(span)}
}

// maybeToolUndeclared is Screen's MaybeTool for a span that declares no
// operation.
func (p *Prefilter) maybeToolUndeclared(span ptrace.Span) bool {
	name := span.Name()
	for i := range p.names {
		m := &p.names[i]
		if m.Prefix != "" {
			if strings.HasPrefix(name, m.Prefix) {
				return true
			}
		} else if name == m.Name {
			return true
		}
	}
	for k, v := range span.Attributes().All() {
		if n := len(k); n < len(p.lens) && !p.lens[n] || n >= len(p.lens) && !p.long {
			continue
		}
		for i := range p.keys {
			m := &p.keys[i]
			if k != m.Key {
				continue
			}
			switch v.Type() {
			case pcommon.ValueTypeStr:
				if extract.EqualFold(v.Str(), m.Value) {
					return true
				}
			case pcommon.ValueTypeEmpty, pcommon.ValueTypeBytes:
				// Value renders these as text: leave them to Classify.
				return true
			}
		}
	}
	return false
}

// Usage is extract.ExtractUsage's token count read in one pass over the
// span's attributes: input + output tokens (else the total), the first
// listed key of each kind winning, nothing for a span that sums nested
// spans' usage (UsageSkip). Most spans carry no usage key and cost one scan
// of their keys, most rejected by length.
func (p *Prefilter) Usage(span ptrace.Span) (int64, bool) {
	var (
		counts [3]int64
		ranks  = [3]int{-1, -1, -1}
		found  bool
		seen   uint64 // skip keys met
	)
	for k, v := range span.Attributes().All() {
		if len(k) >= len(p.usage) {
			continue
		}
		for i := range p.usage[len(k)] {
			u := &p.usage[len(k)][i]
			if k != u.key || (ranks[u.list] >= 0 && ranks[u.list] <= u.rank) {
				continue
			}
			if n, ok := extract.TokenCount(Value(v)); ok {
				counts[u.list], ranks[u.list], found = n, u.rank, true
			}
		}
		for i := range p.skipBy[len(k)] {
			if sk := &p.skipBy[len(k)][i]; k == sk.key && seen&sk.bit == 0 {
				seen |= sk.bit
				if sk.matchAny(v) {
					return 0, false // a skipped span reports nothing, whatever its counts
				}
			}
		}
	}
	if !found {
		return 0, false
	}
	tokens := counts[0] + counts[1]
	if ranks[0] < 0 && ranks[1] < 0 {
		tokens = counts[2]
	}
	if tokens <= 0 {
		return 0, false
	}
	if p.skipLookup {
		for i := range p.skip {
			m := &p.skip[i]
			if v, ok := Lookup(span.Attributes(), m.Key); ok && m.Matches(v) {
				return 0, false
			}
		}
	}
	return tokens, true
}

func (sk *skipKey) matchAny(v pcommon.Value) bool {
	ev := Value(v)
	for i := range sk.matches {
		if sk.matches[i].Matches(ev) {
			return true
		}
	}
	return false
}
