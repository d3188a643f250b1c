package pdataspan

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

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
	skip  []extract.Match
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
	return p
}

// MaybeTool reports false only for a span extract.Classify does not take
// for a tool call.
func (p *Prefilter) MaybeTool(span ptrace.Span) bool {
	// The declared operation decides alone, as in extract.Classify.
	if len(p.keys) > 0 {
		if v, ok := span.Attributes().Get(p.keys[0].Key); ok {
			if v.Type() != pcommon.ValueTypeStr {
				return true // rendered as text by Value: leave it to Classify
			}
			str := v.Str()
			for i := range p.keys {
				if m := &p.keys[i]; m.Key == p.keys[0].Key && (str == m.Value || strings.EqualFold(str, m.Value)) {
					return true
				}
			}
			return false
		}
	}
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
				if strings.EqualFold(v.Str(), m.Value) {
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
	for i := range p.skip {
		m := &p.skip[i]
		if v, ok := Lookup(span.Attributes(), m.Key); ok && m.Matches(v) {
			return 0, false
		}
	}
	return tokens, true
}
