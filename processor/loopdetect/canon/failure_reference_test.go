package canon

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The masking as it was before a failed call's result was read too: the
// frozen reference the error text's masked digest must still equal (the
// masking was since made allocation-free and cut to a limit, its meaning
// unchanged).

func refMaskedHash(text string) uint64 {
	var buf [maxErrorText + 1]byte
	out := buf[:0]
	idWord := false // the previous word names an id ("request 42")
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case isAlnum(c):
			j := i
			for j < len(text) && (isAlnum(text[j]) || text[j] == '-' || text[j] == ':' || text[j] == '.' || text[j] == '_') {
				j++
			}
			tok := strings.TrimRight(text[i:j], "-:._")
			j = i + len(tok)
			if refVolatileToken(tok, idWord) {
				out = append(out, '#')
			} else {
				out = append(out, tok...)
			}
			idWord = refNamesID(tok)
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if len(out) > 0 && out[len(out)-1] != ' ' {
				out = append(out, ' ')
			}
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return 0
	}
	return xxhash.Sum64(out) | 1
}
func refNamesID(tok string) bool {
	switch strings.ToLower(tok) {
	case "id", "request", "req", "request_id", "requestid", "trace", "span", "session", "run", "txn", "pid", "port", "attempt", "seq", "nonce", "correlation":
		return true
	}
	return false
}
func refVolatileToken(tok string, afterIDWord bool) bool {
	digits, hexLetters, letters, seps := 0, 0, 0, 0
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case '0' <= c && c <= '9':
			digits++
		case 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F':
			hexLetters++
		case isAlnum(c):
			letters++
		default:
			seps++
		}
	}
	if digits == 0 {
		return false
	}
	switch {
	case afterIDWord:
		return true
	case letters == 0 && hexLetters == 0 && seps == 0:
		return digits >= 6 // ids and epoch times; line numbers and counts are short
	case letters == 0 && seps == 0:
		return digits+hexLetters >= 8 // hex digests, request ids
	case letters == 0 && hexLetters == 0:
		return seps > 0 && (strings.ContainsAny(tok, ":-") || digits >= 6) // times, dates, 1.5-style versions with many digits
	case letters == 0:
		return len(tok) >= 16 // UUIDs and dashed hex ids
	}
	return isDuration(tok) || digits >= 6
}

// FuzzMaskedHashMatchesReference: an error text's masked digest is the
// reference's, so the failures it tells apart are the same as before.
func FuzzMaskedHashMatchesReference(f *testing.F) {
	for _, s := range []string{
		"upstream failed (request 42)", "job 123e4567-e89b-12d3-a456-426614174000 failed",
		"object 9f86d081884c7d65 missing", "rejected at 2026-11-30T12:00:01Z", "timed out after 1.5s",
		"token expired at 1764504000", "bad  input\n", "SyntaxError: invalid syntax (line 10)",
		"Request_ID: 7f3a; Attempt 3 of 5, SESSION 12", "a-.b_: c.. 1.5.-", "CORRELATION 9 PID 77 port 8080",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// A long result built from s is read at both ends without a panic.
		_ = failedResultHash(strings.Repeat(s+"\n", 1+2*maxErrorText/(len(s)+1)))
		s = truncate(s, maxErrorText)
		if got, want := maskedHash(s), refMaskedHash(s); got != want {
			t.Fatalf("maskedHash(%q) = %x, the reference %x", s, got, want)
		}
	})
}

// TestMaskedHashMatchesReference runs the fuzz target's seeds and the
// failure tests' texts without -fuzz.
func TestMaskedHashMatchesReference(t *testing.T) {
	for _, s := range []string{
		"upstream failed (request 42)", "Request 42", "REQUEST_ID 8 run 9", "x" + strings.Repeat(" y", 300),
		"SyntaxError: invalid syntax (app.py, line 10) request_id=7f3a19c2e41d8 at 2026-11-30T12:00:01Z",
	} {
		s = truncate(s, maxErrorText)
		if got, want := maskedHash(s), refMaskedHash(s); got != want {
			t.Errorf("maskedHash(%q) = %x, the reference %x", s, got, want)
		}
	}
}
