// The terminal matcher: a status key (status, state) whose string value
// names a final state (completed, failed) marks a finished async result.
// It is apart from the key sets because it is policy (which keys, which
// values) that the scanner consults only at a status key, and because the
// prefilter shares its FoldLengths.

package canon

import (
	"strings"
	"unicode/utf8"
)

// terminalMatcher recognises a finished async result: a status-like key
// whose string value names a final state.
type terminalMatcher struct {
	keys   *keySet
	names  []string // the keys as configured
	values []string
	// lens marks the byte lengths below 64 a value matching one of values
	// can have, so most status values ("ok", "running") are turned away by
	// their length; anyLen is set when some value's lengths are not known
	// (not ASCII, or 64 bytes or more).
	lens   uint64
	anyLen bool
}

func newTerminalMatcher(keys, values []string) *terminalMatcher {
	t := &terminalMatcher{keys: newKeySet(keys), names: keys, values: values}
	for _, v := range values {
		lo, hi, ok := FoldLengths(v)
		if !ok || hi >= 64 {
			t.anyLen = true
			continue
		}
		for n := lo; n <= hi; n++ {
			t.lens |= 1 << n
		}
	}
	return t
}

func (t *terminalMatcher) matchValue(v string) bool {
	v = strings.TrimSpace(v)
	if n := len(v); !t.anyLen && (n >= 64 || t.lens&(1<<n) == 0) {
		return false
	}
	for _, tv := range t.values {
		if strings.EqualFold(tv, v) {
			return true
		}
	}
	return false
}

// FoldLengths returns the byte lengths lo..hi of the strings s with
// strings.EqualFold(s, t), when t is ASCII (ok), so that most strings are
// told apart by length without reading them. ASCII letters fold only to
// ASCII letters, but for k and s, which also fold to the Kelvin sign (3
// bytes) and the long s (2 bytes).
func FoldLengths(t string) (lo, hi int, ok bool) {
	hi = len(t)
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= utf8.RuneSelf:
			return 0, 0, false
		case c == 'k' || c == 'K':
			hi += 2
		case c == 's' || c == 'S':
			hi++
		}
	}
	return len(t), hi, true
}
