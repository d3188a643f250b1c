package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// asMainEnv makes the test binary run loopreplay itself, for the tests
// that need it in a process of its own.
const asMainEnv = "LOOPREPLAY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The shell's complaints that began two of seven stream-json logs of a
// public benchmark's runs (captured with `bash -i … > log 2>&1`).
const shellNoise = "bash: cannot set terminal process group (-1): Inappropriate ioctl for device\nbash: no job control in this shell\n"

// gunzipFile is a testdata file's content, inflated.
func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// commandRun is what one run of loopreplay printed.
type commandRun struct {
	code        int
	out, errOut string
}

func runCommand(args ...string) commandRun {
	var out, errOut bytes.Buffer
	code := run(args, nil, &out, &errOut)
	return commandRun{code, out.String(), errOut.String()}
}

// skipCase is a file an audit skips or reads in part.
type skipCase struct {
	name string
	// write puts the file in dir and returns its path.
	write func(t *testing.T, dir string) string
	// note is in the one line on stderr; skipped says the file is not
	// read at all, else it reads as clean does.
	note    string
	skipped bool
	clean   []byte
}

// skipCases are files that are not what their name says, begin with a
// shell's complaints, end in a line cut short, are binary, empty or a
// directory, made from a recorded loop.
func skipCases(t *testing.T) []skipCase {
	loop := gunzipFile(t, filepath.Join(corpusDir, "loop-search-read-oscillation", streamFile))
	lastNL := bytes.LastIndexByte(loop[:len(loop)-1], '\n')
	cutGzip := gzipped(loop)
	cutGzip = cutGzip[:len(cutGzip)*3/4]
	return []skipCase{
		{
			name:  "a shell's complaints before the JSON",
			write: content("noisy.jsonl", append([]byte(shellNoise), loop...)),
			note:  `2 lines before its first JSON line left out ("bash: cannot set terminal process group (-1): Inappropriate ioctl for device"); read from line 3`,
			clean: loop,
		},
		{
			name:  "a last line cut short",
			write: content("live.jsonl", loop[:lastNL+1+40]),
			note:  "is cut short (no newline, not complete JSON): left out",
			clean: loop[:lastNL+1],
		},
		{
			name:  "a gzip stream that ends early",
			write: content("cut.jsonl.gz", cutGzip),
			note:  "its gzip stream ends early (read what it holds); its last line",
			clean: inflatedPart(t, cutGzip),
		},
		{name: "a binary file", write: content("image.jsonl", append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 64)...)), note: "binary content (a NUL byte at offset 8), not JSON text", skipped: true},
		{name: "an empty file", write: content("empty.jsonl", nil), note: "empty", skipped: true},
		{name: "white space only", write: content("blank.jsonl", []byte("\n  \n")), note: "empty", skipped: true},
		{name: "a directory", write: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "projects")
			require.NoError(t, os.Mkdir(p, 0o755))
			return p
		}, note: "a directory, not a file", skipped: true},
		{name: "a missing file", write: func(t *testing.T, dir string) string { return filepath.Join(dir, "gone.jsonl") }, note: "no such file or directory", skipped: true},
		{name: "an HTML error page named .jsonl", write: content("session.jsonl", []byte("<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>\n")), note: `no JSON in its 2 lines (the first: "<!DOCTYPE html>")`, skipped: true},
		{name: "JSON of no format it reads", write: content("config.json", []byte(`{"theme":"dark","editor":"vim"}`+"\n")), note: "not an OTLP JSON traces or logs request", skipped: true},
		{name: "a .gz that is no gzip stream", write: content("run.jsonl.gz", []byte("\x1f\x8bnot gzip at all")), note: "gzip:", skipped: true},
		{name: "a bad line inside", write: content("bad.jsonl", append(append(append([]byte(nil), loop[:lastNL+1]...), "{not json\n"...), loop...)), note: "bad.jsonl:" + lineOf(loop[:lastNL+1]) + ": not a Claude Code transcript line", skipped: true},
	}
}

// TestAuditSkipsWhatItCannotRead: with a file among the inputs that is not
// what its name says, begins with a shell's complaints, ends in a line
// cut short, is binary, unreadable, empty or a directory, loopreplay says
// so in one line on stderr and audits the others, printing what it would
// print without that file (or with it cleaned), and exits 3.
func TestAuditSkipsWhatItCannotRead(t *testing.T) {
	readable := filepath.Join(corpusDir, "loop-identical-call", streamFile)
	for _, tc := range skipCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bad := tc.write(t, dir)
			alone := runCommand(readable)
			require.Equal(t, 0, alone.code, alone.errOut)
			want := alone.out
			if tc.clean != nil {
				p := filepath.Join(t.TempDir(), "clean.jsonl")
				require.NoError(t, os.WriteFile(p, tc.clean, 0o644))
				with := runCommand(p, readable)
				require.Equal(t, 0, with.code, with.errOut)
				want = with.out
			}
			// The file first, as a glob may put it.
			got := runCommand(bad, readable)
			require.Equal(t, 3, got.code, got.errOut)
			require.Equal(t, want, got.out)
			lines := strings.Split(strings.TrimSuffix(got.errOut, "\n"), "\n")
			require.Len(t, lines, 1, got.errOut)
			verb := "loopreplay: read " + bad + " in part: "
			if tc.skipped {
				verb = "loopreplay: skipped " + bad + ": "
			}
			require.True(t, strings.HasPrefix(lines[0], verb), lines[0])
			require.Contains(t, lines[0], tc.note)

			// The summary lists it, and the sessions read.
			sum := runCommand("--summary", bad, readable)
			require.Equal(t, 3, sum.code)
			var s replay.Summary
			require.NoError(t, json.Unmarshal([]byte(sum.errOut[strings.IndexByte(sum.errOut, '{'):]), &s), sum.errOut)
			listed := s.Read.ReadInPart
			if tc.skipped {
				listed = s.Read.SkippedFiles
				require.Len(t, s.Sessions, 1)
			} else {
				require.Len(t, s.Sessions, 2)
			}
			require.Len(t, listed, 1)
			require.Equal(t, bad, listed[0].File)
			require.Contains(t, listed[0].Note, tc.note)
		})
	}
}

func content(name string, b []byte) func(*testing.T, string) string {
	return func(t *testing.T, dir string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// lineOf is the number of the line that follows b.
func lineOf(b []byte) string {
	return strconv.Itoa(bytes.Count(b, []byte{'\n'}) + 1)
}

// inflatedPart is what a gzip stream cut short holds, up to its last
// whole line.
func inflatedPart(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	return b[:bytes.LastIndexByte(b, '\n')+1]
}

// TestExitCodeSaysWhatWasRead: 0 when every input was read whole, 3 when
// some were skipped or read in part and the rest audited, 2 when none
// could be read.
func TestExitCodeSaysWhatWasRead(t *testing.T) {
	good := filepath.Join(corpusDir, "loop-identical-call", streamFile)
	stream := gunzipFile(t, good)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, tc := range []struct {
		name  string
		args  []string
		stdin []byte
		want  int
		lines int
	}{
		{"every input read whole", []string{good, good}, nil, 0, 0},
		{"one of two skipped", []string{good, empty}, nil, 3, 1},
		{"stdin read in part", []string{"-"}, append([]byte(shellNoise), stream...), 3, 1},
		{"stdin and a file, both read", []string{"-", good}, stream, 0, 0},
		{"nothing readable", []string{empty, filepath.Join(dir, "gone.jsonl")}, nil, 2, 2},
		{"empty stdin", []string{"-"}, []byte{}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, tc.want, run(tc.args, bytes.NewReader(tc.stdin), &out, &errOut), errOut.String())
			require.Equal(t, tc.lines, strings.Count(errOut.String(), "\n"), errOut.String())
			if tc.want != 2 {
				require.Contains(t, out.String(), `"to":"stuck"`)
			}
		})
	}
}

// TestHTMLPageOfAnAuditWithASkippedFile: the page of an audit that skipped
// a file lists the sessions read, each with its verdict, the loop's
// linked to its timeline, and names the file skipped.
func TestHTMLPageOfAnAuditWithASkippedFile(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "audit.html")
	bad := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(bad, nil, 0o644))
	loop := filepath.Join(corpusDir, "loop-identical-call", streamFile)
	healthy := filepath.Join(corpusDir, "healthy-01", streamFile)
	got := runCommand("--html", page, "--summary", bad, loop, healthy)
	require.Equal(t, 3, got.code, got.errOut)
	var sum replay.Summary
	require.NoError(t, json.Unmarshal([]byte(got.errOut[strings.IndexByte(got.errOut, '{'):]), &sum))
	require.Len(t, sum.Sessions, 2)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	for _, s := range sum.Sessions {
		row := regexp.MustCompile(`<tr( class="flagged")?><td class="sid" data-v="` + regexp.QuoteMeta(s.Session) + `">(<a href="#timeline-\d">)?`).FindStringSubmatch(string(b))
		require.NotNil(t, row, s.Session)
		require.Equal(t, replay.Flagged(&s), row[2] != "", s.Session)
		require.Equal(t, s.FinalState == "stuck", replay.Flagged(&s))
	}
	require.Contains(t, string(b), `"skipped_files":[{"file":"`+bad+`","note":"empty"}]`)
}
