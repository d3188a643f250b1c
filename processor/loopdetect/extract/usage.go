package extract

import "math"

// Usage is the model token usage one LLM span reports.
type Usage struct {
	// Session is the session key, read like a tool call's (it may point
	// into the Scratch).
	Session string
	// Tokens is input + output tokens (or the reported total).
	Tokens int64
}

// ExtractUsage reads the token usage of s, a span that is not a tool call.
// It reports false when s carries no usage, or sums nested spans' usage
// (Keys.UsageSkip).
func ExtractUsage[S Span](x *Extractor, s S, sc *Scratch) (Usage, bool) {
	var u Usage
	in, inOK := firstCount(s, x.keys.InputTokens)
	out, outOK := firstCount(s, x.keys.OutputTokens)
	switch {
	case inOK || outOK:
		u.Tokens = in + out
	default:
		total, ok := firstCount(s, x.keys.TotalTokens)
		if !ok {
			return u, false
		}
		u.Tokens = total
	}
	if u.Tokens <= 0 {
		return u, false
	}
	// Rules sharing a key (the defaults list them together) share one
	// look-up.
	var (
		lastKey string
		v       Value
		found   bool
	)
	for i := range x.keys.UsageSkip {
		m := &x.keys.UsageSkip[i]
		if i == 0 || m.Key != lastKey {
			lastKey = m.Key
			v, found = s.Attr(m.Key)
		}
		if found && m.matchValue(v) {
			return u, false
		}
	}
	u.Session = UsageSession(x, s, sc)
	return u, true
}

// UsageSession is the session key of a span that reports token usage, read
// like a tool call's: the configured session keys, else the trace id (the
// result may point into sc).
func UsageSession[S Span](x *Extractor, s S, sc *Scratch) string {
	// The one-pass attribute read is needed only for configured session
	// keys; by default the session is the trace id.
	if len(x.slots.session.slots) > 0 {
		a := newAttrs(x, s, sc)
		if text, _, ok := a.firstTextOrResource(&x.slots.session, sc.resource(x).sessionMemo()); ok && text != "" {
			return text
		}
	}
	return sc.traceSession(s.TraceID())
}

// TokenCount is v as a token count of one span: a non-negative number,
// bounded so a hostile value cannot overflow a session's sum.
func TokenCount(v Value) (int64, bool) {
	f, ok := v.Number()
	if !ok || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	return int64(min(f, maxTokensPerSpan)), true
}

// Matches reports whether v satisfies the match's value or prefix.
func (m *Match) Matches(v Value) bool { return m.matchValue(v) }

// maxTokensPerSpan bounds one span's count: a hostile or broken value must
// not overflow a session's sum.
const maxTokensPerSpan = 1 << 32

// firstCount returns the first key's value as a non-negative token count.
func firstCount[S Span](s S, keys []string) (int64, bool) {
	for _, k := range keys {
		v, ok := s.Attr(k)
		if !ok {
			continue
		}
		if n, ok := TokenCount(v); ok {
			return n, true
		}
	}
	return 0, false
}
