// The canonicalizer turns a tool call's arguments or result into a digest
// that ignores key order, member nulls, whitespace around strings and the
// volatile keys (request_id, timestamps), so that two calls meaning the
// same get the same digest. This file holds its entry point, canonicalize,
// the framework wrappers it unwraps, and the arithmetic all parts share
// (type tags, mixing, the short-string hash). The parts live apart so that
// each can be read, and changed, alone:
//   - canon_hasher.go: the one-pass scanner over a document (canonHasher)
//   - canon_unescape.go: decoding of strings with escapes
//   - canon_long.go: hashing of escaped values that outgrow the buffer
//   - canon_keys.go: the key sets (volatile keys, status keys) and their
//     index of keys by spelling
//   - canon_terminal.go: the matcher of finished async results
//   - canon_swar.go: the word-at-a-time byte tests the scanner runs on

package canon

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// maxDepth bounds the nesting of containers the scanner reads.
const maxDepth = 64

var errSyntax = errors.New("malformed JSON")

// canonResult says how a document was read.
type canonResult struct {
	digest   uint64
	opaque   bool // not JSON (or malformed): hashed as trimmed text
	terminal bool
	// member holds where, in the trimmed document, the raw value of the
	// top-level member named by canonicalize's want is, when found (also
	// in a malformed document, if the member itself parsed).
	member [2]int
	found  bool
}

// canonicalize hashes doc: JSON (also a JSON-encoded JSON string) into an
// order-independent canonical digest, anything else as trimmed opaque text.
// want names a member of a top-level object to record in the result.
func canonicalize(doc string, deny *keySet, term *terminalMatcher, unwrap bool, want string) canonResult {
	// strings.TrimSpace, with the test that settles nearly every document
	// (a first and last byte that are ASCII and no space) in line.
	t := doc
	if n := len(t); n == 0 || t[0] <= ' ' || t[0] >= utf8.RuneSelf || t[n-1] <= ' ' || t[n-1] >= utf8.RuneSelf {
		t = strings.TrimSpace(t)
	}
	if t == "" {
		return canonResult{digest: hash64.Mix(hash64.TagOpaque)}
	}
	// Set field by field: the composite literal was built in a second
	// frame slot and copied, buf and all, which cost a small document
	// (`{"a":1}`) 8 % of its instructions.
	var h canonHasher
	h.s, h.deny, h.terminal, h.want = t, deny, term, want
	if t[0] == '"' {
		// A JSON-encoded string: hash its content, which may itself be JSON.
		inner, err := h.str()
		if end, _ := skipSpace(h.s, h.pos); err == nil && end == len(h.s) {
			it := strings.TrimSpace(inner)
			if it != "" && (it[0] == '{' || it[0] == '[') {
				return canonicalize(it, deny, term, unwrap, "")
			}
			return canonResult{digest: hashString(inner)}
		}
		return canonResult{digest: hash64.Mix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true}
	}
	if t[0] != '{' && t[0] != '[' {
		return canonResult{digest: hash64.Mix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true}
	}
	var wrap *wrapperInfo
	var wi wrapperInfo
	if unwrap && t[0] == '{' {
		wrap = &wi
	}
	v, err := h.container(0, wrap)
	if end, _ := skipSpace(h.s, h.pos); err != nil || end != len(h.s) {
		return canonResult{digest: hash64.Mix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true, member: h.member, found: h.found}
	}
	if wrap != nil {
		if u, ok := wi.unwrapped(); ok {
			v = u
		}
	}
	return canonResult{digest: v, terminal: h.foundTerminal, member: h.member, found: h.found}
}

// wrapperInfo records, for a top-level object, the members that framework
// wrappers put around the real arguments, so the caller can unwrap them
// without a second parse.
type wrapperInfo struct {
	other       bool // a key outside every wrapper shape
	inputs      uint64
	hasInputs   bool
	inputStr    uint64
	hasInputStr bool
	args        uint64
	argsEmpty   bool
	hasArgs     bool
	kwargs      uint64
	hasKwargs   bool
	langchain   bool // saw metadata or tags
}

// wrapperKey says which member of a framework wrapper a top-level key
// names: a small number rather than the key, so that the scanner carries
// one byte from a key to its value, not a string.
type wrapperKey uint8

const (
	wrapperOther     wrapperKey = iota // no wrapper's key
	wrapperInputs                      // "inputs"
	wrapperInputStr                    // "input_str"
	wrapperLangChain                   // "metadata", "tags"
	wrapperArgs                        // "args"
	wrapperKwargs                      // "kwargs"

	// wantMember, set in a top-level key's wrapperKey, marks the member
	// canonicalize's want names: one byte carries both to the value.
	wantMember wrapperKey = 0x80
)

func wrapperKeyOf(key string) wrapperKey {
	switch key {
	case "inputs":
		return wrapperInputs
	case "input_str":
		return wrapperInputStr
	case "metadata", "tags":
		return wrapperLangChain
	case "args":
		return wrapperArgs
	case "kwargs":
		return wrapperKwargs
	}
	return wrapperOther
}

func (w *wrapperInfo) note(key wrapperKey, vh uint64) {
	switch key {
	case wrapperInputs:
		w.inputs, w.hasInputs = vh, true
	case wrapperInputStr:
		w.inputStr, w.hasInputStr = vh, true
	case wrapperLangChain:
		w.langchain = true
	case wrapperArgs:
		w.args, w.hasArgs = vh, true
	case wrapperKwargs:
		w.kwargs, w.hasKwargs = vh, true
	default:
		w.other = true
	}
}

// unwrapped returns the hash of the real arguments inside a LangChain
// ({input_str, inputs, metadata, tags}) or Traceloop ({args, kwargs})
// wrapper, or false when the object is no wrapper.
func (w *wrapperInfo) unwrapped() (uint64, bool) {
	if w.other {
		return 0, false
	}
	// LangChain's wrapper always has both: {"inputs": …} alone may be a
	// tool's real arguments.
	if w.hasInputs && w.hasInputStr && !w.hasArgs && !w.hasKwargs {
		return w.inputs, true
	}
	if w.hasKwargs && !w.langchain && !w.hasInputs && !w.hasInputStr && (!w.hasArgs || w.argsEmpty) {
		return w.kwargs, true
	}
	return 0, false
}

// closeHash finishes an object's member sum or an array's running hash
// over n members.
func closeHash(obj bool, acc, n uint64) uint64 {
	if obj {
		return hash64.Mix(acc ^ hash64.TagObject ^ (n * hash64.PrimeArray))
	}
	return hash64.Mix(acc ^ n)
}

func hashString(s string) uint64 {
	if n := len(s); n > 0 && (s[0] <= ' ' || s[n-1] <= ' ') {
		s = strings.TrimSpace(s)
	}
	return hash64.String(s) ^ hash64.TagString
}
