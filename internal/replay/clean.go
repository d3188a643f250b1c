package replay

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// What a file holds before its JSON, and how it may end early: a capture
// redirected from a shell that had no terminal begins with the shell's
// complaints ("bash: cannot set terminal process group (-1): …", "bash:
// no job control in this shell"), and a session still being written, or
// a copy taken while it was, ends in a line cut short. Both are read as
// far as they hold JSON, and say what was left out; a file that holds no
// JSON at all is refused with a reason in words.

// binaryProbe is how much of a file is searched for a NUL byte, the mark
// of binary content (JSON text never holds one); git looks as far.
const binaryProbe = 8 << 10

// Cleaning says what was left out of a file to read it.
type Cleaning struct {
	// LeadingLines counts the lines before the first JSON line, left
	// out; FirstLeading is the first of them, shortened.
	LeadingLines int
	FirstLeading string
	// CutLine is the 1-based number of the last line, left out because it
	// was cut short (no newline and no complete JSON); 0 when it was not.
	CutLine int
	// GzipCut says the gzip stream ended early: what it held was read.
	GzipCut bool
}

// Any says whether anything was left out.
func (c Cleaning) Any() bool { return c.LeadingLines > 0 || c.CutLine > 0 || c.GzipCut }

// Notes are what was left out, a phrase each, for one line on stderr.
func (c Cleaning) Notes() []string {
	var notes []string
	if c.GzipCut {
		notes = append(notes, "its gzip stream ends early (read what it holds)")
	}
	if c.LeadingLines > 0 {
		notes = append(notes, fmt.Sprintf("%s before its first JSON line left out (%q); read from line %d",
			plural(int64(c.LeadingLines), "line"), c.FirstLeading, c.LeadingLines+1))
	}
	if c.CutLine > 0 {
		notes = append(notes, fmt.Sprintf("its last line, %d, is cut short (no newline, not complete JSON): left out", c.CutLine))
	}
	return notes
}

// errEmpty is a file with nothing but white space in it.
var errEmpty = errors.New("empty")

// clean returns what of data the readers read: inflated when it is gzip,
// with lines before the first JSON line and a last line cut short blanked
// (so every reader's line numbers stay the file's). data may be changed
// in place. A file that is empty, binary, or holds no JSON line is an
// error saying so.
func clean(data []byte) ([]byte, Cleaning, error) {
	var c Cleaning
	data, cut, err := inflate(data)
	if err != nil {
		return nil, c, err
	}
	c.GzipCut = cut
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, c, errEmpty
	}
	if i := bytes.IndexByte(data[:min(len(data), binaryProbe)], 0); i >= 0 {
		return nil, c, fmt.Errorf("binary content (a NUL byte at offset %d), not JSON text", i)
	}
	// A UTF-8 byte order mark is no content.
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		copy(data, "   ")
	}
	start, lines := firstJSONLine(data)
	if start < 0 {
		return nil, c, fmt.Errorf("no JSON in its %s (the first: %q)", plural(int64(lines), "line"), firstLineOf(data))
	}
	if lines > 0 {
		c.LeadingLines, c.FirstLeading = lines, firstLineOf(data)
		blank(data[:start])
	}
	if n, from := cutLastLine(data, start); n > 0 {
		c.CutLine = n
		blank(data[from:])
	}
	return data, c, nil
}

// inflate returns gzip input inflated (cut says the stream ended early:
// what it held is returned), anything else as it is.
func inflate(data []byte) (out []byte, cut bool, err error) {
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		return data, false, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, false, fmt.Errorf("gzip: %w", err)
	}
	out, err = io.ReadAll(zr)
	if errors.Is(err, io.ErrUnexpectedEOF) && len(out) > 0 {
		return out, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("gzip: %w", err)
	}
	return out, false, nil
}

// firstJSONLine is the offset of the first line whose first non-blank
// byte opens a JSON object or array, and how many lines come before it;
// -1 and the number of lines when there is none.
func firstJSONLine(data []byte) (start, before int) {
	for off := 0; off < len(data); before++ {
		line := data[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if t := bytes.TrimLeft(line, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return off, before
		}
		off += len(line)
	}
	return -1, before
}

// cutLastLine finds a last line cut short: no newline after it, not
// complete JSON, in a file of one JSON value per line (its first JSON
// line, at start, is one), so a pretty-printed document's closing brace is
// not taken for one. It returns the line's 1-based number and offset, or
// 0 when the last line is whole.
func cutLastLine(data []byte, start int) (line, from int) {
	end := len(bytes.TrimRight(data, " \t\r"))
	if end == 0 || data[end-1] == '\n' {
		return 0, 0
	}
	from = bytes.LastIndexByte(data[:end], '\n') + 1
	if from <= start || json.Valid(data[from:end]) {
		return 0, 0
	}
	first := data[start:]
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if !json.Valid(first) {
		return 0, 0
	}
	return bytes.Count(data[:from], []byte{'\n'}) + 1, from
}

// blank turns every byte but newlines into a space, so line numbers hold.
func blank(b []byte) {
	for i, c := range b {
		if c != '\n' {
			b[i] = ' '
		}
	}
}

// firstLineOf is data's first line, shortened for a message.
func firstLineOf(data []byte) string {
	l, _, _ := bytes.Cut(data, []byte{'\n'})
	s := strings.TrimSpace(string(l))
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return s
}
