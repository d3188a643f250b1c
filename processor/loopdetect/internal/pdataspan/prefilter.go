package pdataspan

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
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
	// table holds the token usage keys and the usage_skip keys, found in
	// one pass over a model span's attributes (keytable.go). skip is the
	// usage_skip list itself, looked up key by key after that pass when
	// its keys outnumber the bits of the pass's seen set (skipLookup).
	table      keyTable
	skip       []extract.Match
	skipLookup bool
	// opBit is the declared operation's key's bit in the usage read's seen
	// set (it is a usage_skip key, decided by its first occurrence, in the
	// defaults).
	opBit uint64
	// opTools are the tool_call values of the declared operation's key
	// (the first tool_call key); opSkip are the usage_skip matches on that
	// key, which Screen reads anyway.
	opTools []opMatch
	opSkip  []opMatch
	// opLens says, for an operation of n < 32 bytes, whether some opTools
	// (opLenTool) or opSkip (opLenSkip) match can take it: most spans'
	// operations (chat, ...) are settled by their length alone.
	opLens [32]uint8
	// opSpelled holds the answers for the operations as configured
	// (execute_tool, invoke_agent, ...), spelled as nearly every span
	// spells them, and opSpelledAt indexes them by their length and first
	// byte (spelledSlot): one compare settles the operations whose length
	// alone does not. A value whose slot is taken is answered by
	// screenString, as any other.
	opSpelled   []spelledOp
	opSpelledAt [64]uint8 // index+1 in opSpelled, 0 for none
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
		if lo, hi, ok := canon.FoldLengths(m.Value); ok {
			return opMatch{m: m, lo: lo, hi: hi}
		}
	}
	return opMatch{m: m, hi: math.MaxInt}
}

// spelledOp is screenString's answer for one operation value.
type spelledOp struct {
	value string
	sc    Screening
}

// fits reports whether a value of n bytes may match.
func (o *opMatch) fits(n int) bool { return o.lo <= n && n <= o.hi }

// NewPrefilter compiles the key lists an Extractor classifies with.
func NewPrefilter(k extract.Keys) *Prefilter {
	p := &Prefilter{names: k.ToolSpanNames, skip: k.UsageSkip}
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
		p.compileOpLens()
		p.compileSpelled()
	}
	var fits bool
	p.table, fits = newKeyTable(p.opKey, k)
	p.skipLookup = !fits
	return p
}

// compileOpLens fills opLens from opTools and opSkip.
func (p *Prefilter) compileOpLens() {
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

// The bits of Prefilter.opLens.
const (
	opLenTool uint8 = 1 << iota
	opLenSkip
)

// Screening is what Screen tells of a span before extraction.
type Screening struct {
	// MaybeTool is false only for a span extract.Classify does not take
	// for a tool call.
	MaybeTool bool
	// NoUsage is set for a span that is no tool call and that Usage would
	// report nothing for: its declared operation is a usage_skip match, or
	// it declares none and carries no token usage key. It need not be
	// read.
	NoUsage bool
	// Declared is set for a span that declares a tool call as
	// extract.ExtractDeclared requires (its first tool_call key holds one
	// of that key's tool_call values): extracting it, the caller need not
	// look the operation up again.
	Declared bool
	// opRead: the screen read the declared operation, a string that is
	// no usage_skip match, so the usage read (UsageAfter) need not read it
	// again.
	opRead bool
}

// Screen reads the span's declared operation, the one look-up most model
// and agent spans cost, and what it settles.
func (p *Prefilter) Screen(span ptrace.Span) Screening {
	// The declared operation decides alone, as in extract.Classify.
	if p.declares {
		if v, ok := span.Attributes().Get(p.opKey); ok {
			// Most operations (chat, ...) are strings of a length no match
			// takes: settled here, without a call. Str is "" for a value
			// of another type.
			if str := v.Str(); len(str) > 0 && len(str) < len(p.opLens) {
				if p.opLens[len(str)] == 0 {
					return Screening{opRead: true}
				}
				if i := p.opSpelledAt[spelledSlot(str)]; i != 0 && p.opSpelled[i-1].value == str {
					return p.opSpelled[i-1].sc
				}
			}
			return p.screenOp(v)
		}
	}
	if tool, usage := p.undeclared(span); !tool {
		return Screening{NoUsage: !usage}
	}
	return Screening{MaybeTool: true}
}

// compileSpelled answers, once, the operation values the matches name.
// The answer is screenString's, so the table cannot disagree with it.
func (p *Prefilter) compileSpelled() {
	for _, ms := range [][]opMatch{p.opTools, p.opSkip} {
		for i := range ms {
			v := ms[i].m.Value
			if v == "" || len(v) >= len(p.opLens) || len(p.opSpelled) == math.MaxUint8 {
				continue
			}
			if slot := spelledSlot(v); p.opSpelledAt[slot] == 0 {
				p.opSpelled = append(p.opSpelled, spelledOp{value: v, sc: p.screenString(v)})
				p.opSpelledAt[slot] = uint8(len(p.opSpelled))
			}
		}
	}
}

// spelledSlot is the slot of opSpelledAt for an operation value of 1 to
// 31 bytes.
func spelledSlot(v string) int { return (int(v[0]) + 7*len(v)) & 63 }

// screenOp settles a span by its declared operation v.
func (p *Prefilter) screenOp(v pcommon.Value) Screening {
	if v.Type() != pcommon.ValueTypeStr {
		return Screening{MaybeTool: true} // rendered as text by Value: leave it to Classify
	}
	return p.screenString(v.Str())
}

// screenString settles a span by its declared operation str, a string.
func (p *Prefilter) screenString(str string) Screening {
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
	// Usage decides a usage_skip key by its first occurrence, the one Get
	// finds.
	if fit&opLenSkip != 0 {
		for i := range p.opSkip {
			if o := &p.opSkip[i]; o.fits(len(str)) && o.m.MatchesString(str) {
				return Screening{NoUsage: true}
			}
		}
	}
	return Screening{opRead: true}
}

// undeclared is Screen's reading of a span that declares no operation:
// whether it may be a tool call, by its name, else by its attributes in
// one pass, which also notes whether the span has a token usage key
// (without one Usage finds no count).
func (p *Prefilter) undeclared(span ptrace.Span) (tool, usage bool) {
	name := span.Name()
	for i := range p.names {
		m := &p.names[i]
		if m.Prefix != "" {
			if strings.HasPrefix(name, m.Prefix) {
				return true, true
			}
		} else if name == m.Name {
			return true, true
		}
	}
	t := &p.table
	for k, v := range span.Attributes().All() {
		if s := t.slotOf(k, t.slots); !usage && s != 0 {
			if e := t.at(k, s); e != nil && e.list != noList {
				usage = true
			}
		}
		if p.toolKey(k, v) {
			return true, true
		}
	}
	return false, usage
}

// toolKey reports whether attribute k, v may make a span that declares no
// operation a tool call.
func (p *Prefilter) toolKey(k string, v pcommon.Value) bool {
	if n := len(k); n < len(p.lens) && !p.lens[n] || n >= len(p.lens) && !p.long {
		return false
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
	return false
}
