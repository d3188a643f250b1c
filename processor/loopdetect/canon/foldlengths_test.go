package canon

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FoldLengths rests on the Unicode case-folding orbits of ASCII letters:
// only k and s reach beyond ASCII, to runes of 3 and 2 bytes.
func TestFoldLengthsBoundEveryFoldOfAnASCIIString(t *testing.T) {
	for c := rune(0); c < utf8.RuneSelf; c++ {
		for r := unicode.SimpleFold(c); r != c; r = unicode.SimpleFold(r) {
			if r < utf8.RuneSelf {
				continue
			}
			switch l := unicode.ToLower(c); {
			case l == 'k' && utf8.RuneLen(r) == 3, l == 's' && utf8.RuneLen(r) == 2:
			default:
				t.Errorf("%q folds to %q (%d bytes), which FoldLengths does not allow for", c, r, utf8.RuneLen(r))
			}
		}
	}
	for _, tc := range []struct{ t, s string }{
		{"invoke_agent", "INVOKE_AGENT"}, {"invoke_agent", "invo\u212ae_agent"}, {"ask", "a\u017f\u212a"},
		{"execute_tool", "Execute_Tool"}, {"", ""},
	} {
		lo, hi, ok := FoldLengths(tc.t)
		if !ok || !strings.EqualFold(tc.s, tc.t) || len(tc.s) < lo || len(tc.s) > hi {
			t.Errorf("FoldLengths(%q) = %d..%d, %v; %q (%d bytes) folds to it: %v", tc.t, lo, hi, ok, tc.s, len(tc.s), strings.EqualFold(tc.s, tc.t))
		}
	}
	if _, _, ok := FoldLengths("caf\u00e9"); ok {
		t.Error("FoldLengths bounded a value that is not ASCII")
	}
}
