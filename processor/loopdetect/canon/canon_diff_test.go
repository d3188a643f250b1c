package canon

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
)

// refNormalizer is Normalizer's Signature and Result over the frozen
// reference scanner (canon_reference_test.go), for one set of keys.
type refNormalizer struct {
	argDeny, resultDeny *refKeySet
	terminal            *refTerminalMatcher
}

func newRefNormalizer(cfg NormalizerConfig) *refNormalizer {
	return &refNormalizer{
		argDeny:    refNewKeySet(cfg.VolatileArgKeys),
		resultDeny: refNewKeySet(append(append([]string(nil), cfg.VolatileArgKeys...), cfg.VolatileResultKeys...)),
		terminal:   &refTerminalMatcher{keys: refNewKeySet(cfg.TerminalKeys), values: cfg.TerminalValues},
	}
}

func (n *refNormalizer) signature(tool, args string) (uint64, ArgsQuality) {
	th := xxhash.Sum64String(tool)
	r := refCanonicalize(args, n.argDeny, nil, true)
	q := ArgsJSON
	if r.opaque {
		q = ArgsOpaque
	}
	return refMix(th^sigSeed) ^ r.digest, q
}

func (n *refNormalizer) result(result string) ResultFingerprint {
	if c, ok := refToolMessageContent(result); ok {
		result = c
	}
	r := refCanonicalize(result, n.resultDeny, n.terminal, false)
	return ResultFingerprint{Digest: r.digest, Terminal: r.terminal, Opaque: r.opaque}
}

// diffConfigs are the key sets the differential tests run under: the
// defaults, and sets with prefixes, separators-only and long keys, and
// other terminal keys.
func diffConfigs() []NormalizerConfig {
	custom := DefaultNormalizerConfig()
	custom.VolatileArgKeys = append(custom.VolatileArgKeys, "x*", "__", "a.b", "path", "very_long_volatile_key_name", "kw*", "Text")
	custom.VolatileResultKeys = append(custom.VolatileResultKeys, "line*", "end", "k")
	custom.TerminalKeys = []string{"phase", "s", "job_state", "end"}
	custom.TerminalValues = []string{"over", "", "DONE"}
	empty := DefaultNormalizerConfig()
	empty.VolatileArgKeys, empty.VolatileResultKeys, empty.TerminalKeys = nil, nil, nil
	for _, c := range []*NormalizerConfig{&custom, &empty} {
		c.MaxCanonicalBytes = 1 << 30
	}
	// Exact keys that a prefix also takes, a status key that is also
	// denied, and one that is the prefix's stem.
	overlap := DefaultNormalizerConfig()
	overlap.VolatileArgKeys = []string{"checkpoint_*", "checkpoint_id", "status", "Run-ID", "a"}
	overlap.TerminalKeys = []string{"checkpoint", "status", "runid"}
	// More keys than the spelled table indexes: the rest keep the
	// normalized path.
	crowded := DefaultNormalizerConfig()
	for i := 0; i < 400; i++ {
		crowded.VolatileArgKeys = append(crowded.VolatileArgKeys, fmt.Sprintf("vk%d", i))
	}
	def := DefaultNormalizerConfig()
	def.MaxCanonicalBytes = 1 << 30
	overlap.MaxCanonicalBytes = 1 << 30
	crowded.MaxCanonicalBytes = 1 << 30
	return []NormalizerConfig{def, custom, empty, overlap, crowded}
}

// diffDocs are documents that exercise every path of the scanner.
func diffDocs() []string {
	docs := []string{
		`{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"42 rows","tool_call_id":"call_a","id":"m1"}}`,
		`{"kwargs":{"content":{"status":"done"}},"ToolMessage":1,`, `{"kw\u0061rgs":{"content":1},"x":"ToolMessage"}`,
		`{"kwargs":[1],"x":"ToolMessage"}`, `{"kwargs":{"a":1,"content":}} "ToolMessage"`, `{"a":"ToolMessage","kwargs":{"content" : "y" , "content":2}}`,
		`{"kwargs":{"content":"a"},"kwargs":{"content":"b"},"q":"ToolMessage"}`, ` {"kwargs" :{"content":[1,2]} , "id":"ToolMessage"}x`,
		`{"args":[],"kwargs":{"q":1},"args":"x"}`, `{"args":[],"args":1,"kwargs":{"q":1}}`, `{"args":null,"kwargs":{"q":1}}`, `{"args":[ ],"kwargs":{"q":1}}`,
		`{"input_str":"x","inputs":null,"metadata":{}}`, `{"callbacks":[],"kwargs":{"q":1}}`,
		`{"a":"{\"status\":\"done\"}"}`, `{"status":"{\"a\":1}"}`, `{"status":" Done "}`, `{"a":{"b":{"status":"done"}}}`,
		// Keys spelled as configured, and spelled otherwise.
		`{"checkpoint_id":"done","checkpoint":"done","status":"done","Run-ID":"done","a":1,"request_id":2,"requestId":3,"REQUEST_ID":4}`,
		`{"x":{"checkpoint_id":"done"},"y":[{"status":"done"},{"Run-ID":"complete"}],"run_id":"done","runid":"done","tool_call_id":"c"}`,
		`{"checkpoint_id":"done"}`, `{"Run-ID":"completed"}`, `{"a":{"status":"done"}}`,
		`{"vk0":1,"vk7":2,"vk150":3,"vk399":4,"VK_12":5,"vk-300":6,"vk400":7,"duration_ms":8,"DurationMs":9,"exit_code":0}`,
		`{"very_long_volatile_key_name":1,"path":2,"a.b":3,"end":"over","k":4,"Text":5}`,
		// Terminal values told apart by length first: folds to the long s
		// and the Kelvin sign, spaces trimmed, lengths at the bounds.
		"{\"status\":\"\u017fucce\u017f\u017f\"}", "{\"status\":\"ſucceeded\"}", `{"status":"SUCCESS"}`, `{"status":"ok"}`,
		"{\"status\":\" completed\u00a0\"}", "{\"phase\":\"o\u212aver\"}", `{"phase":"OVER"}`, `{"phase":" "}`, `{"status":""}`,
		`{"status":"` + strings.Repeat("done", 16) + `"}`, `{"s":"` + strings.Repeat("x", 63) + `"}`,
		`{"a":" {\"b\":[1, 2]} "}`, `{"a":"\t[1,\"x\"]"}`, `{"a":"[1,"}`, "{\"a\":\"\\u00a0{}\"}", "{\"a\":\"\u00a0{}\"}",
		`{"a":"\ud83d"}`, `{"a":"\ud83d\u0041"}`, `{"a":"\udc00\ud83d"}`, `{"a":"\u"}`, `{"a":"x\`, `{"a":"\\"}`, `["\"",1]`,
		`{"0123456789abcdef":1,"0123456789abcdefg":2,"0123456":3,"a-b_c.d":4,"A":5,"ab":6,"abc":7}`,
		`{"x":1e,"y":--1}`, `[-]`, `[+1]`, `[.5]`, `[1.2.3]`, `[tru]`, `[nul]`, `[truex]`, `[true false]`, `{"a":1 "b":2}`, `{"a"}`, `{"a":}`, `{,}`, `[,]`, `[1,]`, `[1,,]`, `{"a":1,,}`, `{"a":1 , }`, `[1 , ]`, `[[],]`,
		"[\x00]", "{\"a\":1}\x00", "{\"a\":1}  \n", "\"x\"", "\"{\\\"a\\\":1}\"", "\" [1] \"", "\"\\u0020{}\"", "\"abc", "5", "[1]]", "[[1]", "{\"a\":{}}}",
		strings.Repeat(`{"a":"`, 3) + `x` + strings.Repeat(`"}`, 3),
		strings.Repeat("[", 63) + `"[[1]]"` + strings.Repeat("]", 63), strings.Repeat("[", 64) + `"[]"` + strings.Repeat("]", 64),
		strings.Repeat("[", 62) + `"[[1]]"` + strings.Repeat("]", 62), strings.Repeat(`{"a":`, 63) + `{}` + strings.Repeat("}", 63),
		strings.Repeat(`{"a":`, 64) + `{}` + strings.Repeat("}", 64), strings.Repeat(`{"a":`, 64) + `null` + strings.Repeat("}", 64),
		`{"s":"` + strings.Repeat("é\\n\\\"", 100) + `"}`, `{"s":"` + strings.Repeat("\\u00e9", 60) + `"}`,
		`{"` + strings.Repeat("k\\n", 30) + `":"` + strings.Repeat("v", 300) + `"}`,
	}
	for n := 0; n < 40; n++ {
		s := strings.Repeat("x", n)
		docs = append(docs, `{"`+s+`":"`+s+`","k`+s+`":" `+s+`","`+s+`_":["`+s+`\n"]}`, `["`+s+`\"","\\`+s+`"]`)
	}
	// Escaped strings longer than the hasher's buffer: hashed in chunks
	// unless they may be JSON, with space (ASCII and not, escaped and not,
	// runs longer than the buffer) at both ends and in the middle, and a
	// multi-byte space across a chunk's end.
	long := func(k int, c string) string { return strings.Repeat(c, k) }
	docs = append(docs,
		`{"s":"`+long(300, " ")+`\n`+long(20, "x")+`"}`, `{"s":"ab\n`+long(300, "x")+long(600, " ")+`\t"}`,
		`{"s":"a\n`+long(300, "x")+long(600, " ")+`b"}`, `{"s":"\n`+long(10, "x")+long(300, " ")+`"}`,
		`{"s":"\n`+long(16, "x")+long(300, "\t")+`y"}`, `{"s":"\n`+long(17, "x")+long(300, "\t")+`"}`,
		`{"s":"`+long(100, "\u3000")+`x\n`+long(300, "y")+`"}`, `{"s":"`+long(100, "\u3000")+`"}`,
		`{"s":"`+long(100, "\u3000")+`x\n`+long(300, "y")+long(100, "\u00a0")+`"}`,
		`{"a":" {\"k\":\"`+long(300, "x")+`\"}"}`, `{"a":"[\"`+long(300, "x")+`\"]"}`, `{"a":"[\"`+long(300, "x")+`\"]x"}`,
		`{"status":"\n`+long(300, "x")+`"}`, `{"s":"\n`+long(300, "x")+`\ud83d\ude00\u00e9"}`, `{"s":"\n`+long(300, "x"),
		`["\n`+long(300, "x")+`","`+long(300, "y")+`\"`+long(3, " ")+`"]`, `{"`+long(300, "k")+`\n":"`+long(300, "v")+`\n"}`,
		// hashString trims only a string with a byte of at most ' ' at
		// either end: a non-ASCII space at one end alone stays.
		`{"s":"`+"\u00a0"+`x\n`+long(300, "y")+`"}`, `{"s":"`+"\u00a0"+`x\n`+long(300, "y")+` "}`,
		`{"s":"x\n`+long(300, "y")+"\u00a0"+`"}`, `{"s":"\u00a0x\n`+long(300, "y")+"\u00a0\\t"+`"}`,
		`{"s":"x\n`+long(300, "y")+"\u2003\u2003"+long(300, "z")+"\u2003"+`"}`,
	)
	for k := 248; k < 264; k++ {
		docs = append(docs, `{"s":"\n`+long(k, "x")+"\u00a0"+`"}`, `{"s":"\n`+long(k, "x")+"\u00a0y"+long(300, "z")+`"}`,
			`{"s":"\n`+long(k, "x")+`\u2003 `+"\u2003"+`"}`, `{"s":"\t`+long(k, " ")+`x"}`, `{"s":"`+long(k, "x")+`\n"}`,
			`{"s":"\n`+long(k, "\u00e9")+`"}`, `{"s":"\n`+long(k/3, "x")+long(k, "\u0085")+`x"}`)
	}
	for seed := uint64(1); seed <= 8; seed++ {
		docs = append(docs, benchdata.Args("read_file", seed, 200), benchdata.Result(seed, 500),
			benchdata.SearchResult(seed, 200), benchdata.SearchResult(seed, 2048), benchdata.SearchResult(seed, 9000),
			benchdata.FileRead(seed, 1024), benchdata.FileRead(seed, 9000))
	}
	return docs
}

// diffPair is the live and the reference normalizer of one configuration.
type diffPair struct {
	live *Normalizer
	ref  *refNormalizer
}

// diffPairs returns a live and a reference normalizer for each of diffConfigs.
var diffPairs = sync.OnceValue(func() []diffPair {
	var ps []diffPair
	for _, cfg := range diffConfigs() {
		ps = append(ps, diffPair{NewNormalizer(cfg), newRefNormalizer(cfg)})
	}
	return ps
})

// checkAgainstReference fails when doc's signature or result fingerprint
// differs from the frozen reference scanner's under any diffConfigs set.
func checkAgainstReference(t *testing.T, doc string) {
	t.Helper()
	for ci, p := range diffPairs() {
		n, ref := p.live, p.ref
		gs, gq := n.Signature("t", doc, true)
		ws, wq := ref.signature("t", doc)
		if gs != ws || gq != wq {
			t.Fatalf("config %d: Signature(%q) = %#x/%d, reference %#x/%d", ci, doc, uint64(gs), gq, uint64(ws), wq)
		}
		if got, want := n.Result("t", doc), ref.result(doc); got != want {
			t.Fatalf("config %d: Result(%q) = %+v, reference %+v", ci, doc, got, want)
		}
	}
}

// TestCanonicalMatchesReference: the scanner's digests equal the frozen
// reference's on documents of every shape, whole and cut at every length
// (which reaches every error path and every end of buffer).
func TestCanonicalMatchesReference(t *testing.T) {
	docs := diffDocs()
	for _, d := range docs {
		checkAgainstReference(t, d)
		if len(d) > 600 {
			continue
		}
		for i := range d {
			checkAgainstReference(t, d[:i])
			checkAgainstReference(t, d[i:])
		}
	}
}

// FuzzCanonicalMatchesReference: on any input, Signature and Result agree
// with the frozen reference scanner bit for bit.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, d := range diffDocs() {
		f.Add(d)
	}
	f.Fuzz(checkAgainstReference)
}

// FuzzLongValueMatchesReference: a string value long enough to outgrow the
// hasher's buffer while it is decoded (hashed in chunks then) digests as the
// reference's, whatever spaces and escapes it starts, repeats and ends with.
func FuzzLongValueMatchesReference(f *testing.F) {
	f.Add(`\n`, "ab", "  ", uint16(300))
	f.Add(" \u00a0", `x\t`, "\u2003", uint16(200))
	f.Add("", `\u00e9`, `\u00a0`, uint16(100))
	f.Add("\u3000", "y ", "\u00a0", uint16(400))
	f.Add(`\"{`, `\"a\":1,`, `}`, uint16(90))
	f.Fuzz(func(t *testing.T, head, unit, tail string, k uint16) {
		body := strings.Repeat(unit, int(k)%(1+(16<<10)/(1+len(unit))))
		checkAgainstReference(t, `{"s":"`+head+body+tail+`"}`)
		checkAgainstReference(t, `["`+head+body+tail+`",1]`)
	})
}
