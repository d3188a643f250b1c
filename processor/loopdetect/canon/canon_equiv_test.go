package canon

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// hasDuplicateKeys reports an object with a key twice: encoding/json keeps
// the last, the canonical digest counts both, so such input has no single
// meaning to compare.
func hasDuplicateKeys(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token in an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			case '[':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.obj && top.expect {
				if top.keys[t] {
					return true
				}
				top.keys[t] = true
				top.expect = false
				continue
			}
		}
		if top != nil && top.obj {
			top.expect = true
		}
	}
}

// FuzzCanonicalMatchesReencoding: the streaming digest of a JSON document
// equals the digest of the same document decoded and re-encoded by
// encoding/json (keys sorted, whitespace and escapes normalized), so the
// hand-written scanner agrees with the standard library on what a document
// means.
func FuzzCanonicalMatchesReencoding(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,{"x":"y"}]}`,
		`{"q":"\u00e9\ud83d\ude00 \"quoted\" \\ back\/slash\n"}`,
		`{"nested":{"deep":{"deeper":[1,2.5,-3e2]}}}`,
		`{"s":"<tag>&amp;"}`,
		`[{"a":1},{"b":2}]`,
		`{"arguments":"{\"b\":1,\"a\":2}"}`,
	} {
		f.Add(s)
	}
	n := NewNormalizer(DefaultNormalizerConfig())
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) || !utf8.ValidString(doc) || hasDuplicateKeys([]byte(doc)) {
			t.Skip()
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
		dec.UseNumber() // keep number text: the digest hashes it as written
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Skip()
		}
		re, err := json.Marshal(v)
		if err != nil {
			t.Skip()
		}
		a, qa := n.Signature("t", doc, true)
		b, qb := n.Signature("t", string(re), true)
		if qa != qb || a != b {
			t.Fatalf("digest differs after re-encoding:\n in: %s\nout: %s", doc, re)
		}
	})
}
