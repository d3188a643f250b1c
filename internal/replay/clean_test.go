package replay

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClean: what of a file the readers get, and what is said of the rest.
func TestClean(t *testing.T) {
	const line = `{"a":1}`
	for _, tc := range []struct {
		name, in string
		// want is what the readers get; the same number of lines.
		want    string
		cleaned Cleaning
		err     string
	}{
		{name: "JSON lines", in: line + "\n" + line + "\n", want: line + "\n" + line + "\n"},
		{name: "a last line without a newline", in: line + "\n" + line, want: line + "\n" + line},
		{name: "a shell's complaints first", in: "bash: no job control in this shell\n\n" + line + "\n",
			want: strings.Repeat(" ", 34) + "\n\n" + line + "\n", cleaned: Cleaning{LeadingLines: 2, FirstLeading: "bash: no job control in this shell"}},
		{name: "a last line cut short", in: line + "\n" + `{"a":`, want: line + "\n     ", cleaned: Cleaning{CutLine: 2}},
		{name: "a cut line followed by a newline is no cut last line", in: line + "\n" + `{"a":` + "\n", want: line + "\n" + `{"a":` + "\n"},
		{name: "a pretty-printed document's closing brace", in: "{\n  \"a\": 1\n}", want: "{\n  \"a\": 1\n}"},
		{name: "a byte order mark", in: "\xef\xbb\xbf" + line + "\n", want: "   " + line + "\n"},
		{name: "a JSON array", in: "[1,2]\n", want: "[1,2]\n"},
		{name: "empty", in: "", err: "empty"},
		{name: "white space", in: " \n\t\n", err: "empty"},
		{name: "binary", in: "PK\x03\x04\x00\x00", err: "binary content (a NUL byte at offset 4)"},
		{name: "text", in: "a,b\n1,2\n", err: `no JSON in its 2 lines (the first: "a,b")`},
		{name: "a long first line is shortened", in: strings.Repeat("x", 100), err: `(the first: "` + strings.Repeat("x", 80) + `…")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, c, err := clean([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			require.Equal(t, tc.cleaned, c)
			require.Equal(t, tc.cleaned.Any(), len(c.Notes()) > 0)
		})
	}
}

// TestCleanInflatesGzip: gzip input is inflated, and a stream cut short
// gives what it held, its cut last line left out.
func TestCleanInflatesGzip(t *testing.T) {
	whole := sessionUse + "\n" + sessionResult + "\n"
	got, c, err := clean(gz(t, whole))
	require.NoError(t, err)
	require.Equal(t, whole, string(got))
	require.False(t, c.Any())

	z := gz(t, strings.Repeat(whole, 50))
	got, c, err = clean(z[:len(z)-20])
	require.NoError(t, err)
	require.True(t, c.GzipCut)
	require.True(t, strings.HasPrefix(string(got), whole))

	_, _, err = clean([]byte("\x1f\x8b\x00garbage"))
	require.ErrorContains(t, err, "gzip:")
}
