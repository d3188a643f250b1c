package canon

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

func TestSignatureEquivalence(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, true},
		{"whitespace", `{"a": 1}`, "  {\n\"a\":1}  ", true},
		{"trimmed strings", `{"q":"  x "}`, `{"q":"x"}`, true},
		{"null members dropped", `{"q":"x","page":null}`, `{"q":"x"}`, true},
		{"volatile request id", `{"q":"x","request_id":"1"}`, `{"q":"x","requestId":"2"}`, true},
		{"volatile nested", `{"q":{"v":1,"timestamp":"a"}}`, `{"q":{"v":1,"timestamp":"b"}}`, true},
		{"langgraph prefix", `{"q":1,"langgraph_step":3}`, `{"q":1,"langgraph_step":4}`, true},
		{"escaped equals plain", `{"q":"a\"b"}`, `{"q":"a\u0022b"}`, true},
		{"json-encoded string", `"{\"q\":\"x\"}"`, `{"q":"x"}`, true},
		{"langchain wrapper", `{"input_str":"x","inputs":{"q":1},"metadata":{"langgraph_step":1},"tags":["a"]}`, `{"input_str":"x","inputs":{"q":1},"metadata":{"langgraph_step":2},"tags":["b"]}`, true},
		{"traceloop wrapper", `{"args":[],"kwargs":{"q":1}}`, `{"q":1}`, true},
		{"surrogate pair equals the character", `{"q":"\ud83d\ude00"}`, `{"q":"😀"}`, true},
		{"embedded JSON string canonicalized", `{"arguments":"{\"b\":1,\"request_id\":\"r1\"}"}`, `{"arguments":"{\"request_id\":\"r2\", \"b\":1}"}`, true},
		{"embedded JSON string keeps meaning", `{"arguments":"{\"b\":1}"}`, `{"arguments":"{\"b\":2}"}`, false},
		{"inputs without input_str is no wrapper", `{"inputs":{"q":1},"tags":["a"]}`, `{"inputs":{"q":1},"tags":["b"]}`, false},
		{"cursor is meaning", `{"q":"x","cursor":"p1"}`, `{"q":"x","cursor":"p2"}`, false},
		{"path is meaning", `{"path":"/a"}`, `{"path":"/b"}`, false},
		{"array order matters", `{"a":[1,2]}`, `{"a":[2,1]}`, false},
		{"types differ", `{"a":1}`, `{"a":"1"}`, false},
		{"nested vs flat", `{"a":{"b":1}}`, `{"a":{"c":1}}`, false},
		{"key and value swap", `{"a":"b"}`, `{"b":"a"}`, false},
		{"opaque text trimmed", "ls -la ", "ls -la", true},
		{"opaque differs", "ls -la", "ls -l", false},
		{"malformed is opaque", `{"a":`, `{"a":`, true},
		{"empty object vs empty", `{}`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := n.Signature("tool", tt.a, true)
			b, _ := n.Signature("tool", tt.b, true)
			if (a == b) != tt.same {
				t.Fatalf("Signature(%q)=%x, Signature(%q)=%x, want same=%v", tt.a, a, tt.b, b, tt.same)
			}
		})
	}
}

func TestSignatureQuality(t *testing.T) {
	cfg := DefaultNormalizerConfig()
	cfg.MaxCanonicalBytes = 1024
	n := NewNormalizer(cfg)
	tests := []struct {
		args    string
		present bool
		want    ArgsQuality
	}{
		{`{"a":1}`, true, ArgsJSON},
		{`not json`, true, ArgsOpaque},
		{`{"a":`, true, ArgsOpaque},
		{strings.Repeat("x", 2048), true, ArgsOversized},
		{"", false, ArgsAbsent},
	}
	for _, tt := range tests {
		if _, q := n.Signature("t", tt.args, tt.present); q != tt.want {
			t.Errorf("Signature(%.20q) quality %d, want %d", tt.args, q, tt.want)
		}
	}
	a, _ := n.Signature("search", "", false)
	b, _ := n.Signature("fetch", "", false)
	c, _ := n.Signature("search", "", true)
	if a == b || a == c {
		t.Fatal("name-only signatures must depend on the tool and differ from empty arguments")
	}
}

func TestToolOverrides(t *testing.T) {
	cfg := DefaultNormalizerConfig()
	cfg.ToolOverrides = map[string]KeyOverride{
		"clock": {Keep: []string{"timestamp"}},
		"page":  {Drop: []string{"cursor"}},
	}
	n := NewNormalizer(cfg)
	a, _ := n.Signature("clock", `{"timestamp":"a"}`, true)
	b, _ := n.Signature("clock", `{"timestamp":"b"}`, true)
	if a == b {
		t.Error("kept key must stay meaning for its tool")
	}
	a, _ = n.Signature("page", `{"cursor":"a"}`, true)
	b, _ = n.Signature("page", `{"cursor":"b"}`, true)
	if a != b {
		t.Error("dropped key must be ignored for its tool")
	}
	a, _ = n.Signature("other", `{"timestamp":"a"}`, true)
	b, _ = n.Signature("other", `{"timestamp":"b"}`, true)
	if a != b {
		t.Error("defaults apply to other tools")
	}
}

func TestResultNormalization(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	tests := []struct {
		name     string
		a, b     string
		same     bool
		terminal bool
	}{
		{"volatile result keys", `{"ok":true,"pid":12,"duration_ms":3}`, `{"duration_ms":9,"ok":true,"pid":99}`, true, false},
		{"content differs", `{"rows":50}`, `{"rows":51}`, false, false},
		{"terminal state", `{"state":"complete","payload":{"x":1}}`, `{"payload":{"x":1},"state":"complete"}`, true, true},
		{"terminal nested", `{"task":{"status":"Succeeded"}}`, `{"task":{"status":"Succeeded"}}`, true, true},
		{"running is not terminal", `{"state":"running"}`, `{"state":"running"}`, true, false},
		{"langchain tool message", `{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"42 rows","tool_call_id":"call_a","id":"m1"}}`,
			`{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"42 rows","tool_call_id":"call_b","id":"m2"}}`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := n.Result("t", tt.a), n.Result("t", tt.b)
			if (a.Digest == b.Digest) != tt.same {
				t.Fatalf("same=%v, want %v", a.Digest == b.Digest, tt.same)
			}
			if a.Terminal != tt.terminal {
				t.Fatalf("terminal=%v, want %v", a.Terminal, tt.terminal)
			}
		})
	}
}

func TestHugeAndInvalidInputDoNotPanic(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	huge := `{"data":"` + strings.Repeat("a", 1<<20) + `"}`
	if _, q := n.Signature("t", huge, true); q != ArgsOversized {
		t.Fatalf("1 MiB argument: quality %d, want oversized", q)
	}
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if _, q := n.Signature("t", deep, true); q != ArgsOversized && q != ArgsOpaque {
		t.Fatalf("deep nesting: quality %d, want a degraded quality", q)
	}
	invalid := "{\"q\":\"\xff\xfe\"}"
	if utf8.ValidString(invalid) {
		t.Fatal("test input should be invalid UTF-8")
	}
	a, q := n.Signature("t", invalid, true)
	b, _ := n.Signature("t", invalid, true)
	if a != b || q != ArgsJSON {
		t.Fatalf("invalid UTF-8 must hash deterministically as JSON, got quality %d", q)
	}
}

func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":[1,"x",null,true]}`, `"{\"q\":1}"`, `{"input_str":"x","inputs":{"q":1}}`, `{"a":"\u00e9\n"}`, `[`, ``, "\xff"} {
		f.Add(s)
	}
	n := NewNormalizer(DefaultNormalizerConfig())
	f.Fuzz(func(t *testing.T, s string) {
		a, qa := n.Signature("t", s, true)
		b, qb := n.Signature("t", s, true)
		if a != b || qa != qb {
			t.Fatalf("non-deterministic signature for %q", s)
		}
		// Surrounding whitespace never changes the signature.
		c, _ := n.Signature("t", " "+s+"\n", true)
		if c != a {
			t.Fatalf("whitespace changed the signature of %q", s)
		}
	})
}

func FuzzNormalizeResult(f *testing.F) {
	for _, s := range []string{`{"state":"complete"}`, `{"lc":1,"kwargs":{"content":"x"},"id":["ToolMessage"]}`, `plain text`, `{"a":{"status":"done"}}`, `{"ToolMessage"`} {
		f.Add(s)
	}
	n := NewNormalizer(DefaultNormalizerConfig())
	f.Fuzz(func(t *testing.T, s string) {
		a := n.Result("t", s)
		b := n.Result("t", s)
		if a != b {
			t.Fatalf("non-deterministic result digest for %q", s)
		}
	})
}

// TestEveryShortConfiguredKeyIsFoundBySpelling: each configured exact key
// of at most 16 bytes, and each terminal key on the result side, spelled
// as configured, is found by its spelling with match's answer for it (the
// 32-slot table it replaced left 16 of the 42 short default result keys to
// the normalized path, and the terminal keys to the look-ups); keys spelled
// otherwise are not.
func TestEveryShortConfiguredKeyIsFoundBySpelling(t *testing.T) {
	cfg := DefaultNormalizerConfig()
	n := NewNormalizer(cfg)
	sets := []struct {
		name     string
		ks       *keySet
		term     *terminalMatcher
		denied   []string
		terminal []string
	}{
		{"arguments", n.argDeny, nil, cfg.VolatileArgKeys, nil},
		{"results", n.resultDeny, n.terminal, append(append([]string(nil), cfg.VolatileArgKeys...), cfg.VolatileResultKeys...), cfg.TerminalKeys},
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			h := canonHasher{deny: set.ks, terminal: set.term}
			check := func(k string) {
				a, b := hash64.ShortWords(k)
				e, ok := set.ks.spelledHit(hash64.Short(a, b, len(k)), a, b, len(k))
				wantDenied, wantStatus := h.match(k, 0)
				if !ok || e.denied != wantDenied || set.ks.statusOf(e, set.term) != wantStatus {
					t.Errorf("%q: found %v, want denied %v and status %v as match says", k, ok, wantDenied, wantStatus)
				}
				other := strings.ToUpper(k)
				a, b = hash64.ShortWords(other)
				if _, ok := set.ks.spelledHit(hash64.Short(a, b, len(other)), a, b, len(other)); ok {
					t.Errorf("%q found by the spelling of %q", other, k)
				}
			}
			for _, k := range append(set.denied, set.terminal...) {
				if len(k) <= 16 && !strings.HasSuffix(k, "*") {
					check(k)
				}
			}
		})
	}
}

// TestSpelledKeysBeyondTheTableKeepTheNormalizedPath: a key set too large
// for the index indexes what it can, and every key, indexed (classified by
// its spelling) or not (by the normalized path), is dropped from a digest.
func TestSpelledKeysBeyondTheTableKeepTheNormalizedPath(t *testing.T) {
	var keys []string
	for i := 0; i < 400; i++ {
		keys = append(keys, fmt.Sprintf("vk%d", i))
	}
	ks := newKeySet(keys)
	want := canonicalize(`{"x":2}`, ks, nil, false, "").digest
	indexed := 0
	for _, k := range keys {
		a, b := hash64.ShortWords(k)
		if _, ok := ks.spelledHit(hash64.Short(a, b, len(k)), a, b, len(k)); ok {
			indexed++
		}
		if got := canonicalize(`{"`+k+`":1,"x":2}`, ks, nil, false, "").digest; got != want {
			t.Errorf("%q kept in the digest", k)
		}
	}
	if indexed == 0 || indexed == len(keys) || indexed > 255 {
		t.Fatalf("%d of %d keys indexed, want some of them and at most 255", indexed, len(keys))
	}
}
