package canon

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

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
			a, b := n.Failure("Err", tt.a, "").Text, n.Failure("Err", tt.b, "").Text
			if (a == b) != tt.same {
				t.Fatalf("same digest = %v, want %v", a == b, tt.same)
			}
		})
	}
	// The class is joined to the text by the engine (engine.FailureDigest).
	if n.Failure("A", "", "").Text != 0 {
		t.Fatal("a failure without text must leave its class alone")
	}
}

func TestFailedCallResultIsEvidenceMaskedAsTheErrorText(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	long := func(head, tail string) string {
		return head + "\n" + strings.Repeat("  File \"lib.py\", line 3, in helper\n", 40) + tail
	}
	tests := []struct {
		name           string
		textA, resultA string
		textB, resultB string
		same           bool
	}{
		{"a moved error line in the result is a new failure",
			"tool failed", "SyntaxError: invalid syntax (app.py, line 10)",
			"tool failed", "SyntaxError: invalid syntax (app.py, line 20)", false},
		{"a new message in the result is a new failure",
			"tool failed", "NameError: name 'x' is not defined",
			"tool failed", "TypeError: unsupported operand", false},
		{"ids and times in the result are masked",
			"tool failed", "SyntaxError (line 10) request_id=7f3a19c2e41d8 at 2026-11-30T12:00:01Z",
			"tool failed", "SyntaxError (line 10) request_id=7f3a29c2e41d8 at 2026-11-30T12:00:07Z", true},
		{"the same result is the same failure",
			"tool failed", "SyntaxError (line 10)",
			"tool failed", "SyntaxError (line 10)", true},
		{"a result alone is the error text",
			"", "SyntaxError (line 10)",
			"SyntaxError (line 10)", "", true},
		{"a result that repeats the error text adds nothing",
			"SyntaxError (line 10)", "SyntaxError (line 10)",
			"SyntaxError (line 10)", "", true},
		{"the error text still counts beside the result",
			"exit 1", "same output",
			"exit 2", "same output", false},
		{"a long result's last line is read",
			"exit 1", long("Traceback (most recent call last):", "ValueError: bad row 10"),
			"exit 1", long("Traceback (most recent call last):", "ValueError: bad row 20"), false},
		{"a long result's first line is read",
			"exit 1", long("$ python app.py --step 1", "ValueError: bad row"),
			"exit 1", long("$ python app.py --step 2", "ValueError: bad row"), false},
		{"a long result whose volatile parts change is the same failure",
			"exit 1", long("run 1764504000 started", "done in 1.5s"),
			"exit 1", long("run 1764504077 started", "done in 250ms"), true},
		{"a long result without an error text is read at both ends",
			"", long("Traceback (most recent call last):", "ValueError: bad row 10"),
			"", long("Traceback (most recent call last):", "ValueError: bad row 20"), false},
		{"a result made longer than an error text by an id alone is the same failure",
			"exit 1", strings.Repeat("x ", 240) + "job 42 failed (request 7)",
			"exit 1", strings.Repeat("x ", 240) + "job 42 failed (request 123e4567-e89b-12d3-a456-426614174000)", true},
		{"a long result whose last id changes length is the same failure",
			"exit 1", long("started", "") + "job 123e4567-e89b-12d3-a456-426614174000 failed",
			"exit 1", long("started", "") + "job 1764504077 failed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := n.Failure("Err", tt.textA, tt.resultA).Text, n.Failure("Err", tt.textB, tt.resultB).Text
			if (a == b) != tt.same {
				t.Fatalf("same digest = %v, want %v", a == b, tt.same)
			}
		})
	}
	if n.Failure("Err", "failed", "SyntaxError (line 10)").Text == n.Failure("Err", "failed", "").Text {
		t.Fatal("a recorded result must be part of the evidence")
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
		{"error", "", true}, // the result below is the error text
		{"rate_limit", "slow down", false},
	}
	for _, tt := range tests {
		result := ""
		if tt.text == "" {
			result = "Unknown tool: web_search"
		}
		if got := n.Failure(tt.class, tt.text, result).UnknownTool; got != tt.want {
			t.Errorf("Failure(%q, %q).UnknownTool = %v, want %v", tt.class, tt.text, got, tt.want)
		}
	}
}

func TestShownErrorQuotesOnlyWhatTheMaskingKeeps(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	long := strings.Repeat("word ", 40)
	tests := []struct {
		name, text, result, want string
	}{
		{"the error text, ids and times masked", "gh: command not found (request 4242 at 2026-12-01T10:00:00Z)", "", "gh: command not found (request # at #)"},
		{"line numbers stay", "SyntaxError: invalid syntax (app.py, line 10)", "", "SyntaxError: invalid syntax (app.py, line 10)"},
		{"without an error text, the result's last line", "", "Traceback (most recent call last):\n  File \"a.py\"\nKeyError: 'user'\n", "KeyError: 'user'"},
		{"nothing recorded", "", "", ""},
		{"cut on a character boundary", long + "é", "", strings.TrimSpace(long[:maxShownError]) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := n.ShownError(tt.text, tt.result)
			assert.Equal(t, tt.want, got)
			assert.True(t, utf8.ValidString(got))
		})
	}
}
