package engine

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// failureDigestsPinned are failure digests as the normalizer made them
// whole before the canonicalizer left the engine: canon's masked text,
// joined to the class here, must give them bit for bit.
var failureDigestsPinned = []struct {
	class, text, result string
	want                uint64
}{
	{"", "", "", 0xe194d4d10e41320e},
	{"NotFoundError", "", "", 0x15bd02c53ef2dcbe},
	{"ToolError", "upstream failed (request 42) at 2026-11-30T12:00:01Z", "", 0x1ef31ea6a6d9e329},
	{"error", "", "Traceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'user'\n", 0x57d20d1bf19eb8c1},
	{"pydantic_ai.exceptions.ToolRetryError-with-a-class-name-longer-than-sixty-four-bytes", "exit 1", "SyntaxError (line 10)", 0xb1e53dda7b1d8d7},
}

func TestFailureDigestsArePinned(t *testing.T) {
	n := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	for _, tc := range failureDigestsPinned {
		if got := FailureDigest(tc.class, n.Failure(tc.class, tc.text, tc.result).Text); uint64(got) != tc.want {
			t.Errorf("FailureDigest(%q, %q, %q) = %#x, want %#x", tc.class, tc.text, tc.result, uint64(got), tc.want)
		}
	}
}

func TestFailureDigestKeepsTheClass(t *testing.T) {
	if FailureDigest("A", 7) == FailureDigest("B", 7) {
		t.Fatal("the error class must be part of the evidence")
	}
	// A failure without text is its class alone: the digest the engine
	// makes for a failure nobody normalized.
	if FailureDigest("A", 0) != failureDigest("A", 0) {
		t.Fatal("a failure without text is its class alone")
	}
	long := strings.Repeat("c", maxErrorClass+10)
	if FailureDigest(long, 7) != FailureDigest(long[:maxErrorClass], 7) {
		t.Fatal("the class is read to maxErrorClass bytes, as the engine keeps it")
	}
}

// TestShownErrorFitsWhatASessionKeeps: canon's quoted error text is never
// cut again by the engine's bound for it.
func TestShownErrorFitsWhatASessionKeeps(t *testing.T) {
	n := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	for _, text := range []string{strings.Repeat("word ", 60), strings.Repeat("é", 200), strings.Repeat("x", 4096)} {
		got := n.ShownError(text, "")
		if len(got) > maxShownError+len("…") || !utf8.ValidString(got) {
			t.Errorf("ShownError gives %d bytes, the engine keeps %d", len(got), maxShownError+len("…"))
		}
		if !strings.HasSuffix(got, "…") {
			t.Errorf("ShownError(%d bytes) = %q, want it cut", len(text), got)
		}
	}
}
