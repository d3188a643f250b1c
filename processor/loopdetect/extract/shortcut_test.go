package extract

import (
	"strings"
	"testing"
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
	slowResult := func(result string) string {
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
