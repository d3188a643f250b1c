package extract

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEqualFoldIsStringsEqualFold(t *testing.T) {
	words := []string{"", "a", "A", "execute_tool", "EXECUTE_TOOL", "Execute_Tool", "chat", "invoke_agent",
		"k", "K", "\u212a", "\u212aey", "key", "s", "\u017f", "\u017ftop", "stop", "é", "É", "_x", "1", "[", "{"}
	for _, s := range words {
		for _, u := range words {
			if got, want := EqualFold(s, u), strings.EqualFold(s, u); got != want {
				t.Errorf("EqualFold(%q, %q) = %v, strings.EqualFold says %v", s, u, got, want)
			}
		}
	}
}

// The first-key test in front of the wrapper checks only decides sooner:
// every document unwraps as it did with the checks alone.
func TestWrapperFirstKeyShortcutChangesNoResult(t *testing.T) {
	slowArgs := func(args string) string {
		if !containsBy(args, `"input_str"`, 3) && !containsBy(args, `"inputs"`, 3) {
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
	slowResult := func(result string) string {
		if !containsBy(result, `"output"`, 4) {
			return result
		}
		if onlyKeys(result, "output", resultWrapperKeys...) {
			if out, ok := member(result, "output"); ok {
				return out
			}
		}
		return result
	}
	docs := []string{
		``, `{}`, ` { } `, `[]`, `"inputs"`, `{"inputs":{"q":1}}`, ` {"input_str":"a","tags":[]}`,
		`{"tags":[],"inputs":{"q":1},"kwargs":{}}`, `{"metadata":{},"input_str":"x"}`, `{"kwargs":{},"inputs":null,"input_str":"s"}`,
		`{"path":"a","inputs":1}`, `{"inputs":1,"path":"a"}`, `{"in\"puts":1}`, `{"inputs"`, `{"inputs":`, `{inputs:1}`,
		`{"output":"r"}`, `{"output":{"a":1},"kwargs":{"n":"t"}}`, `{"kwargs":{},"output":"r"}`, `{"status":"ok","output":"r"}`,
		`{"output":"r","status":"ok"}`, `{"\u006futput":"r"}`, `{"output":"r",}`,
	}
	for _, d := range docs {
		if got, want := unwrapArgs(d), slowArgs(d); got != want {
			t.Errorf("unwrapArgs(%q) = %q, without the shortcut %q", d, got, want)
		}
		if got, want := unwrapResult(d), slowResult(d); got != want {
			t.Errorf("unwrapResult(%q) = %q, without the shortcut %q", d, got, want)
		}
	}
}

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
