package extract

import (
	"strings"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// This file reads raw JSON text without decoding it: it finds a member or an
// array element and returns the slice of the input that holds its value, so
// client wrappers can be unwrapped without allocating. Anything malformed
// simply reports "not found"; the normalizer then sees the whole document.

// skipWS returns the index of the first non-space byte at or after i.
func skipWS(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the JSON string starting at s[i] == '"'.
func skipString(s string, i int) (int, bool) {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// maxRawDepth bounds nesting, so hostile input cannot make skipping costly
// beyond its length.
const maxRawDepth = 64

// skipValue returns the index after the JSON value starting at s[i].
func skipValue(s string, i int) (int, bool) {
	i = skipWS(s, i)
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				end, ok := skipString(s, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
				if depth > maxRawDepth {
					return 0, false
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	default:
		start := i
		for i < len(s) {
			switch s[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, i > start
			}
			i++
		}
		return i, i > start
	}
}

// rawKey returns the unescaped-enough key text of the string at s[i]: keys
// with escapes are returned with their escapes (they then match nothing we
// look for, which is the safe outcome).
func rawKey(s string, i int) (string, int, bool) {
	end, ok := skipString(s, i)
	if !ok {
		return "", 0, false
	}
	return s[i+1 : end-1], end, true
}

// eachMember calls fn for every member of the object at the start of doc,
// with the raw value text; fn returns false to stop. It reports false for
// anything that is not a well-formed object.
func eachMember(doc string, fn func(key, raw string) bool) bool {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return true
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return false
		}
		key, next, ok := rawKey(doc, i)
		if !ok {
			return false
		}
		i = skipWS(doc, next)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		vs := skipWS(doc, i+1)
		ve, ok := skipValue(doc, vs)
		if !ok {
			return false
		}
		if !fn(key, doc[vs:ve]) {
			return true
		}
		i = skipWS(doc, ve)
		if i >= len(doc) {
			return false
		}
		switch doc[i] {
		case ',':
			i = skipWS(doc, i+1)
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// member returns the raw value of the top-level member key of an object.
func member(doc, key string) (string, bool) {
	var out string
	found := false
	eachMember(doc, func(k, raw string) bool {
		if k == key {
			out, found = raw, true
			return false
		}
		return true
	})
	return out, found
}

// element returns the raw value of element n of the array at the start of doc.
func element(doc string, n int) (string, bool) {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return "", false
	}
	i = skipWS(doc, i+1)
	for idx := 0; i < len(doc) && doc[i] != ']'; idx++ {
		ve, ok := skipValue(doc, i)
		if !ok {
			return "", false
		}
		if idx == n {
			return doc[i:ve], true
		}
		i = skipWS(doc, ve)
		if i < len(doc) && doc[i] == ',' {
			i = skipWS(doc, i+1)
		}
	}
	return "", false
}

// atPath follows a dot-separated path of member names and array indexes
// ("0.parts.0.arguments") and returns the raw value found there.
func atPath(doc, path string) (string, bool) {
	cur := strings.TrimSpace(doc)
	for path != "" {
		seg, rest, _ := strings.Cut(path, ".")
		path = rest
		var ok bool
		if n, isIdx := index(seg); isIdx && strings.HasPrefix(cur, "[") {
			cur, ok = element(cur, n)
		} else {
			cur, ok = member(cur, seg)
		}
		if !ok {
			return "", false
		}
	}
	return cur, true
}

func index(seg string) (int, bool) {
	if seg == "" || len(seg) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// onlyKeys reports whether doc is an object whose keys all appear in allowed
// and which has the key must.
func onlyKeys(doc, must string, allowed ...string) bool {
	has := false
	ok := eachMember(doc, func(k, _ string) bool {
		if k == must {
			has = true
		}
		for _, a := range allowed {
			if k == a {
				return true
			}
		}
		has = false
		return false
	})
	return ok && has
}

// firstKeyIn reports whether doc is an object whose first key is one of
// keys, read as onlyKeys reads it: a necessary condition of onlyKeys(doc,
// must, keys...) decided without reading the rest of doc.
func firstKeyIn(doc string, keys []string) bool {
	i := skipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipWS(doc, i+1)
	if i >= len(doc) || doc[i] != '"' {
		return false
	}
	key, _, ok := rawKey(doc, i)
	if !ok {
		return false
	}
	for _, k := range keys {
		if key == k {
			return true
		}
	}
	return false
}

// isNullOrEmpty reports a raw JSON null, "" or an empty object/array.
func isNullOrEmpty(raw string) bool {
	switch strings.TrimSpace(raw) {
	case "", "null", `""`, "{}", "[]":
		return true
	}
	return false
}

// dropLines removes from raw, a JSON string, the lines that begin with one
// of prefixes, and the blank lines that then end it (what separated them);
// raw is returned as it is when it is no string or no line goes. Lines end
// at the escape \n (not at an escaped backslash before n).
func dropLines(raw string, prefixes []string) string {
	if len(prefixes) == 0 || len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return raw
	}
	body := raw[1 : len(raw)-1]
	// Most results have no such line: they are looked at without being
	// copied, so a tool span's read allocates nothing.
	if !anyLine(body, prefixes) {
		return raw
	}
	var kept []string
	for start := 0; start <= len(body); {
		end := lineEnd(body, start)
		if line := body[start:end]; !hasAnyPrefix(line, prefixes) {
			kept = append(kept, line)
		}
		start = end + 2
	}
	for len(kept) > 0 && kept[len(kept)-1] == "" {
		kept = kept[:len(kept)-1]
	}
	return `"` + strings.Join(kept, `\n`) + `"`
}

// dropTextLines removes from s, plain text, the lines that begin with one
// of prefixes; s is returned as it is when no line goes.
func dropTextLines(s string, prefixes []string) string {
	if !anyTextLine(s, prefixes) {
		return s
	}
	var b strings.Builder
	for rest := s; rest != ""; {
		line, tail, found := strings.Cut(rest, "\n")
		if !hasAnyPrefix(line, prefixes) {
			b.WriteString(line)
			if found {
				b.WriteByte('\n')
			}
		}
		rest = tail
	}
	return b.String()
}

// anyLine reports whether a line of body, a JSON string's content, begins
// with one of prefixes.
func anyLine(body string, prefixes []string) bool {
	for start := 0; start <= len(body); {
		end := lineEnd(body, start)
		if hasAnyPrefix(body[start:end], prefixes) {
			return true
		}
		start = end + 2
	}
	return false
}

// anyTextLine reports whether a line of s, plain text, begins with one of
// prefixes.
func anyTextLine(s string, prefixes []string) bool {
	for rest := s; rest != ""; {
		line, tail, _ := strings.Cut(rest, "\n")
		if hasAnyPrefix(line, prefixes) {
			return true
		}
		rest = tail
	}
	return false
}

// lineEnd is the index in body, a JSON string's content, of the \n escape
// that ends the line starting at start, or len(body).
func lineEnd(body string, start int) int {
	for i := start; i+1 < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		if body[i+1] == 'n' {
			return i
		}
		i++ // an escaped character, an escaped backslash included
	}
	return len(body)
}

// nudgeAnchor is the index in webhookbody.NudgeMarker of the byte its
// search looks for, its first 'v'. Searched by its first byte, an 'l', a
// 500-byte result of prose without the marker took 1,900 instructions.
const nudgeAnchor = 9

// dropNudge removes from a result the supervisor's own nudge, which a CLI
// without a channel of its own for a hook's context puts into the call's
// output (OpenCode: loopsupervisor's plugin appends it to the output the
// model reads, and the AI SDK's ai.toolCall.result records that output).
// Left in, the nudge reads as a changed result: the session recovers one
// call after the warn and the kill slips. The nudge runs from the marker,
// with the blank line before it (two line ends), to the end of the JSON
// string it is in (its closing quote), or of raw when raw is plain text.
func dropNudge(raw string) string {
	i := indexBy(raw, webhookbody.NudgeMarker, nudgeAnchor)
	if i < 0 {
		return raw
	}
	start := i
	for range 2 {
		switch {
		case strings.HasSuffix(raw[:start], `\n`):
			start -= 2
		case strings.HasSuffix(raw[:start], "\n"):
			start--
		}
	}
	end := len(raw)
	if t := strings.TrimSpace(raw); t == "" || (t[0] != '"' && !looksLikeJSON(t)) {
		return raw[:start]
	}
	for j := i + len(webhookbody.NudgeMarker); j < len(raw); j++ {
		if raw[j] == '\\' {
			j++
			continue
		}
		if raw[j] == '"' {
			end = j
			break
		}
	}
	return raw[:start] + raw[end:]
}

// hasAnyPrefix reports whether line begins with one of prefixes.
func hasAnyPrefix(line string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}
