package canon

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// maxErrorText bounds how much of an error text is read: the part that
// names the failure comes first.
const maxErrorText = 512

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// defaultUnknownToolMarkers are the frameworks' ways of saying that the
// model called a tool that does not exist (LangChain "is not a valid tool",
// Vercel AI SDK NoSuchToolError, OpenAI Agents "Tool … not found", Google ADK
// "not found in the tools_dict", MCP "Unknown tool", CrewAI "don't exist",
// Pydantic AI "Unknown tool name"). Matched case-insensitively against the
// error class and text.
var defaultUnknownToolMarkers = []string{
	"is not a valid tool", "nosuchtool", "no such tool", "unknown tool", "tool not found",
	"not found in the tools_dict", "don't exist, these are the only available", "invalid tool",
	"not found in agent", "unavailable tool",
}

// FailureEvidence is a failed call's normalized evidence.
type FailureEvidence struct {
	// Text is the hash of the error text and the failed call's recorded
	// result, their volatile parts masked; 0 when neither has anything
	// but whitespace. The engine's FailureDigest joins it to the error
	// class: the engine makes the class-only digest itself for a failure
	// nobody normalized, so the joining stays with it.
	Text uint64
	// UnknownTool is set when the error says the tool does not exist.
	UnknownTool bool
}

// Failure normalizes a failed call's evidence: its error text and the
// result the failed call recorded (its error class is only read for an
// unknown tool), each text with the volatile parts — UUIDs, hex digests,
// long numbers (ids, epoch times), timestamps, durations, numbers named as
// ids — masked, and the meaningful ones (line numbers, counts) kept. A
// syntax error that moves from line 10 to line 20 is a new failure; the
// same failure with a new request id is not. The result counts because
// many agents (OpenHands among them) put the error in the tool's output
// while the span says only that it failed: a class and a status text that
// never change would otherwise make a fix that moves the error look like
// the same failure. Without an error text the result is the error text.
func (n *Normalizer) Failure(class, text, result string) FailureEvidence {
	if result == text {
		result = ""
	}
	text = truncate(text, maxErrorText)
	h := maskedHash(text)
	if rh := failedResultHash(result); rh != 0 {
		if h == 0 {
			h = rh
		} else {
			h = hash64.Mix(h^rh^tagFailedResult) | 1
		}
	}
	ev := FailureEvidence{Text: h}
	marked := text // where a "no such tool" message is looked for
	if marked == "" {
		marked = truncate(result, maxErrorText)
	}
	lc, lt := strings.ToLower(class), strings.ToLower(marked)
	for _, m := range n.unknownTool {
		if strings.Contains(lc, m) || strings.Contains(lt, m) {
			ev.UnknownTool = true
			break
		}
	}
	return ev
}

// maxShownError bounds the masked error text an explanation quotes: the
// line that names the failure, not the whole trace.
const maxShownError = 120

// ShownError is the failure text an explanation quotes: the error text, or
// else the last non-empty line of the failed call's result, masked as the
// failure evidence is (ids, digests, times and durations become '#'),
// whitespace collapsed, cut to maxShownError bytes on a character
// boundary; "" when there is neither. Nothing is shown that the masking
// does not keep.
func (n *Normalizer) ShownError(text, result string) string {
	src := strings.TrimSpace(text)
	if src == "" {
		src = strings.TrimSpace(result)
		if i := strings.LastIndexByte(src, '\n'); i >= 0 {
			src = strings.TrimSpace(src[i+1:])
		}
	}
	if src == "" {
		return ""
	}
	var buf [maxShownError + 4]byte
	out := bytes.TrimSpace(mask(buf[:0], src[:min(len(src), maxErrorText)], len(buf)))
	if len(out) > maxShownError {
		out = out[:maxShownError]
		for len(out) > 0 && !utf8.Valid(out) {
			out = out[:len(out)-1]
		}
		out = append(bytes.TrimSpace(out), "…"...)
	}
	return string(out)
}

// tagFailedResult keeps a failed call's result apart from its error text.
const tagFailedResult = 0x7fa11ed0e5017002

// maxResultScan bounds how much of a failed call's result is masked from
// its start.
const maxResultScan = 4 * maxErrorText

// failedResultHash is maskedHash of a failed call's result (0: none). A
// result whose masked form is longer than an error text is read at both
// ends, its start naming the command or the file and its end what finally
// failed (a traceback's last line, a test run's summary): the first and
// the last half of an error text's length of its masked form. Deciding and
// cutting by the masked form, not the raw text, keeps an id of another
// length from moving the cut.
func failedResultHash(result string) uint64 {
	var buf [maxErrorText + 1]byte
	all := mask(buf[:0], result[:min(len(result), maxResultScan)], len(buf))
	if len(all) <= maxErrorText && len(result) <= maxResultScan {
		return hashMasked(all)
	}
	const half = maxErrorText / 2
	head := bytes.TrimSpace(all[:min(len(all), half)])
	// The end is masked from the first space in its last error text's
	// length: a token boundary, from which the masked text is a suffix of
	// the whole's.
	end := result[max(0, len(result)-maxErrorText):]
	if i := strings.IndexAny(end, " \t\n\r"); i >= 0 {
		end = end[i+1:]
	}
	var tb [maxErrorText]byte
	tail := mask(tb[:0], end, len(tb))
	tail = bytes.TrimSpace(tail[max(0, len(tail)-half):])
	if len(head) == 0 && len(tail) == 0 {
		return 0
	}
	return hash64.Mix(xxhash.Sum64(head)^hash64.Mix(xxhash.Sum64(tail))) | 1
}

// maskedHash hashes text with its volatile tokens replaced by one marker;
// 0 for a text with nothing but whitespace.
func maskedHash(text string) uint64 {
	var buf [maxErrorText + 1]byte
	return hashMasked(mask(buf[:0], text, len(buf)))
}

// hashMasked hashes a masked text; 0 for nothing but whitespace.
func hashMasked(out []byte) uint64 {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return 0
	}
	return xxhash.Sum64(out) | 1
}

// mask appends text to out, at most limit bytes in all, with its volatile
// tokens replaced by '#' and each run of whitespace by one space.
func mask(out []byte, text string, limit int) []byte {
	prev := "" // the previous word: a number after an id word is an id ("request 42")
	for i := 0; i < len(text) && len(out) < limit; {
		c := text[i]
		switch {
		case isAlnum(c):
			j := i
			for j < len(text) && (isAlnum(text[j]) || isJoiner(text[j])) {
				j++
			}
			for isJoiner(text[j-1]) { // text[i] is alphanumeric
				j--
			}
			tok := text[i:j]
			if volatileToken(tok, prev) {
				out = append(out, '#')
			} else {
				out = append(out, tok[:min(len(tok), limit-len(out))]...)
			}
			prev = tok
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
	return out
}

// isJoiner marks the bytes a token runs over inside (1.5s, 12:00:01,
// request_id) but does not end with.
func isJoiner(c byte) bool { return c == '-' || c == ':' || c == '.' || c == '_' }

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// namesID reports a word after which a number is an identifier.
func namesID(tok string) bool {
	// Lowered into a buffer: strings.ToLower allocated for every word with
	// a capital, and a tool's output has many. Tokens are ASCII.
	var b [len("correlation")]byte
	if len(tok) < 2 || len(tok) > len(b) {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	switch string(b[:len(tok)]) {
	case "id", "request", "req", "request_id", "requestid", "trace", "span", "session", "run", "txn", "pid", "port", "attempt", "seq", "nonce", "correlation":
		return true
	}
	return false
}

// volatileToken reports a token that changes from call to call without
// changing the failure; prev is the word before it.
func volatileToken(tok, prev string) bool {
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
	case namesID(prev): // asked only of a token with digits
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

// isDuration reports a number with a time unit: 250ms, 1.5s, 3m.
func isDuration(tok string) bool {
	i := 0
	for i < len(tok) && ('0' <= tok[i] && tok[i] <= '9' || tok[i] == '.') {
		i++
	}
	if i == 0 {
		return false
	}
	switch strings.ToLower(tok[i:]) {
	case "ns", "us", "µs", "ms", "s", "sec", "secs", "m", "min", "h":
		return true
	}
	return false
}
