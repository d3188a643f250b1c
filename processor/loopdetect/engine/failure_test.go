package engine

import "testing"

func TestFailureEvidenceMasksVolatilePartsAndKeepsMeaning(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"request ids differ", "upstream failed (request 42)", "upstream failed (request 97)", true},
		{"uuids differ", "job 123e4567-e89b-12d3-a456-426614174000 failed", "job 9b2e4567-e89b-12d3-a456-426614170001 failed", true},
		{"hex digests differ", "object 9f86d081884c7d65 missing", "object 2c26b46b68ffc68f missing", true},
		{"timestamps differ", "rejected at 2026-11-30T12:00:01Z", "rejected at 2026-11-30T12:07:44Z", true},
		{"durations differ", "timed out after 250ms", "timed out after 1.5s", true},
		{"epoch times differ", "token expired at 1764504000", "token expired at 1764504077", true},
		{"whitespace differs", "bad  input\n", "bad input", true},
		{"line numbers are meaning", "SyntaxError: invalid syntax (line 10)", "SyntaxError: invalid syntax (line 20)", false},
		{"counts are meaning", "3 tests failed", "2 tests failed", false},
		{"paths are meaning", "no such file 'a.txt'", "no such file 'b.txt'", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := n.Failure("Err", tt.a).Digest, n.Failure("Err", tt.b).Digest
			if (a == b) != tt.same {
				t.Fatalf("same digest = %v, want %v", a == b, tt.same)
			}
		})
	}
	if n.Failure("A", "x").Digest == n.Failure("B", "x").Digest {
		t.Fatal("the error class must be part of the evidence")
	}
	if n.Failure("A", "").Digest != failureDigest("A", 0) {
		t.Fatal("a failure without text is its class alone")
	}
}

func TestUnknownToolIsRecognisedFromTheFrameworksMessages(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	tests := []struct {
		class, text string
		want        bool
	}{
		{"ToolException", "Error: web_search is not a valid tool, try one of [search].", true},
		{"AI_NoSuchToolError", "Model tried to call unavailable tool 'x'.", true},
		{"ModelBehaviorError", "Tool web_search not found in agent Assistant", true},
		{"ValueError", "Function web_search is not found in the tools_dict.", true},
		{"McpError", "Unknown tool: web_search", true},
		{"error", "Action 'web_search' don't exist, these are the only available Actions: ...", true},
		{"FileNotFoundError", "no such file 'tool.txt'", false},
		{"rate_limit", "slow down", false},
	}
	for _, tt := range tests {
		if got := n.Failure(tt.class, tt.text).UnknownTool; got != tt.want {
			t.Errorf("Failure(%q, %q).UnknownTool = %v, want %v", tt.class, tt.text, got, tt.want)
		}
	}
}
