// The command reader: does a shell command line wait, and for which job?
// A coding agent polls a CI run, a rollout or a starting server by putting
// a wait into the call itself (`sleep 30 && gh run view 4242 --json status`,
// `kubectl rollout status deploy/web`, `until curl -sf …; do sleep 2; done`),
// so the command's words say both: whether the call waits, and — the words
// left once the wait is taken out — the job it polls.
//
// It splits the line as a shell does (quotes, escapes, `$(…)`, operators,
// redirections) without running or expanding anything. Only command words
// count: `echo "sleep 30"` passes one quoted word to echo and does not
// wait, while `bash -c '…sleep 5…'` and `watch '…'` run their quoted script,
// which is read in turn.

package engine

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// commandWait is what a command line says about waiting.
type commandWait struct {
	// waits is set when the line waits: a sleep of a second or more, a
	// sleep inside a loop, timeout, watch, wait, a --wait, --watch or
	// --interval flag, or a watching subcommand (gh run watch, kubectl
	// rollout status, kubectl wait).
	waits bool
	// owner digests the words of the commands that are not the wait (0 when
	// none is left: a bare `sleep 30` polls nothing).
	owner uint64
	// label is the first polled command's program and subcommand words
	// ("gh run view"): never an argument.
	label string
}

const (
	// maxCommandScan bounds the bytes of a command line read for a wait.
	maxCommandScan = 8 << 10
	// maxCommandWords bounds the words read, over the line and its scripts.
	maxCommandWords = 1024
	// maxScriptDepth bounds the nesting of scripts read (bash -c '… sh -c …').
	maxScriptDepth = 2
	// maxLabelWords is how many words after the program a label keeps.
	maxLabelWords = 2
	// minSleepSeconds is the shortest sleep that is a wait by itself; a
	// shorter one paces a loop, which is the wait then.
	minSleepSeconds = 1
)

// shWord is one word of a command: its unquoted text in the scanner's
// buffer.
type shWord struct {
	lo, hi int
}

// cmdScan reads one command line.
type cmdScan struct {
	buf  []byte
	wait commandWait
	// loops counts the until/while/for loops the scan is inside.
	loops  int
	budget int
	label  []byte
}

// readCommand reads a shell command line.
func readCommand(line string) commandWait {
	var sc cmdScan
	sc.budget = maxCommandWords
	sc.wait.owner = ownerSeed
	line = truncate(line, maxCommandScan)
	// The words' text is never longer than the line, but for a script's
	// words read again: one buffer, grown rarely.
	sc.buf = make([]byte, 0, 2*len(line)+16)
	sc.script(line, 0)
	return sc.result()
}

// readArgv reads a command given as its words (a shell tool whose command
// is an array: ["bash", "-lc", "sleep 5 && …"]).
func readArgv(argv []string) commandWait {
	var sc cmdScan
	sc.budget = maxCommandWords
	sc.wait.owner = ownerSeed
	words := make([]shWord, 0, len(argv))
	for _, a := range argv {
		lo := len(sc.buf)
		sc.buf = append(sc.buf, a...)
		words = append(words, shWord{lo, len(sc.buf)})
	}
	sc.simple(words, 0)
	return sc.result()
}

// ownerSeed starts an owner digest; an owner still equal to it has no word.
const ownerSeed = 0x0a17e4a17c0de5

func (sc *cmdScan) result() commandWait {
	w := sc.wait
	if w.owner == ownerSeed {
		w.owner = 0
	}
	w.label = string(sc.label)
	return w
}

// text is a word's text. It points into buf, which only grows: the bytes
// of a word read are never written again, so the string stays valid while
// further words are appended (to the same array or to a new one).
func (sc *cmdScan) text(w shWord) string {
	if w.hi == w.lo {
		return ""
	}
	return unsafe.String(&sc.buf[w.lo], w.hi-w.lo)
}

// script splits line into simple commands and reads each.
func (sc *cmdScan) script(line string, depth int) {
	lx := shLexer{src: line}
	cmd := make([]shWord, 0, 16)
	for sc.budget > 0 {
		lo := len(sc.buf)
		var tok byte
		sc.buf, tok = lx.next(sc.buf)
		if tok == tokWord {
			sc.budget--
			cmd = append(cmd, shWord{lo, len(sc.buf)})
			continue
		}
		if len(cmd) > 0 {
			sc.simple(cmd, depth)
			cmd = cmd[:0]
		}
		if tok == tokEnd {
			return
		}
	}
}

// Keywords and prefix commands that stand before a command word.
var transparentWords = map[string]bool{
	"do": true, "then": true, "else": true, "elif": true, "if": true, "fi": true, "!": true,
	"{": true, "}": true, "time": true, "nohup": true, "command": true, "exec": true, "builtin": true,
	"env": true, "stdbuf": true, "nice": true,
}

// simple reads one simple command.
func (sc *cmdScan) simple(words []shWord, depth int) {
	// Keywords, assignments and prefix commands before the command word.
	for len(words) > 0 {
		w := sc.text(words[0])
		switch {
		case w == "until" || w == "while":
			sc.loops++
		case w == "for" || w == "select":
			sc.loops++
			return // the loop's header: `for i in 1 2 3` runs nothing
		case w == "done":
			sc.loops = max(sc.loops-1, 0)
		case transparentWords[w] || isAssignment(w) || strings.HasPrefix(w, "-"):
			// A command word never starts with '-': an option of a prefix
			// command (env -i) is passed over.
		default:
			sc.command(words, depth)
			return
		}
		words = words[1:]
	}
}

// command reads a simple command from its command word on.
func (sc *cmdScan) command(words []shWord, depth int) {
	name := baseName(sc.text(words[0]))
	args := words[1:]
	switch name {
	case "sleep":
		if sc.sleepWaits(args) {
			sc.wait.waits = true
		}
		return // a sleep is the wait, never the job
	case "wait":
		sc.wait.waits = true
		return
	case "timeout":
		sc.wait.waits = true
		sc.simple(sc.afterTimeout(args), depth)
		return
	case "watch":
		sc.wait.waits = true
		rest := sc.afterWatch(args)
		if len(rest) == 1 && depth < maxScriptDepth {
			sc.script(sc.text(rest[0]), depth+1) // watch runs its argument through sh -c
			return
		}
		sc.simple(rest, depth)
		return
	case "bash", "sh", "zsh", "dash", "ksh":
		if script, ok := sc.shellScript(args); ok {
			if depth < maxScriptDepth {
				sc.script(script, depth+1)
			}
			return
		}
	}
	sc.job(words)
}

// sleepWaits reports whether a sleep's operands make it a wait: a second
// or more, or any pause inside a loop (the loop is the wait), or an
// operand it cannot read (`sleep "$INTERVAL"`: a deliberate pause).
func (sc *cmdScan) sleepWaits(args []shWord) bool {
	total, read := 0.0, false
	for _, a := range args {
		w := sc.text(a)
		if strings.HasPrefix(w, "-") {
			continue
		}
		s, ok := sleepSeconds(w)
		if !ok {
			return true
		}
		total, read = total+s, true
	}
	return read && (total >= minSleepSeconds || (sc.loops > 0 && total > 0))
}

// sleepSeconds reads a sleep operand: a number with an optional s, m, h or
// d suffix, or "infinity".
func sleepSeconds(w string) (float64, bool) {
	if w == "infinity" {
		return 1e9, true
	}
	mult := 1.0
	if n := len(w); n > 1 {
		switch w[n-1] {
		case 's':
			w = w[:n-1]
		case 'm':
			mult, w = 60, w[:n-1]
		case 'h':
			mult, w = 3600, w[:n-1]
		case 'd':
			mult, w = 86400, w[:n-1]
		}
	}
	f, err := strconv.ParseFloat(w, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return f * mult, true
}

// afterTimeout is timeout's command: its options and duration taken off.
func (sc *cmdScan) afterTimeout(args []shWord) []shWord {
	for len(args) > 0 {
		w := sc.text(args[0])
		if !strings.HasPrefix(w, "-") {
			break
		}
		args = args[1:]
		if (w == "-s" || w == "-k" || w == "--signal" || w == "--kill-after") && len(args) > 0 {
			args = args[1:]
		}
	}
	if len(args) > 0 {
		args = args[1:] // the duration
	}
	return args
}

// afterWatch is watch's command: its options taken off.
func (sc *cmdScan) afterWatch(args []shWord) []shWord {
	for len(args) > 0 {
		w := sc.text(args[0])
		if !strings.HasPrefix(w, "-") {
			break
		}
		args = args[1:]
		if (w == "-n" || w == "--interval" || w == "-q" || w == "--equexit") && len(args) > 0 {
			args = args[1:]
		}
	}
	return args
}

// shellScript is the script of `bash -c SCRIPT` (also -lc, -ec, …).
func (sc *cmdScan) shellScript(args []shWord) (string, bool) {
	for i, a := range args {
		w := sc.text(a)
		if strings.HasPrefix(w, "--") {
			continue // --login, --norc
		}
		if !strings.HasPrefix(w, "-") {
			return "", false // bash script.sh
		}
		if strings.IndexByte(w, 'c') >= 0 && i+1 < len(args) {
			return sc.text(args[i+1]), true
		}
	}
	return "", false
}

// waitFlags are the options that make a command wait or poll itself.
var waitFlags = [...]string{"--wait", "--watch", "--interval", "--poll-interval"}

// waitFlag reports a wait option (--wait, --wait=5m), and whether its
// value is the next word (--interval 10).
func waitFlag(w string) (flag, takesNext bool) {
	if !strings.HasPrefix(w, "--") {
		return false, false
	}
	name, _, hasValue := strings.Cut(w, "=")
	for _, f := range waitFlags {
		if name == f {
			return true, !hasValue && (f == "--interval" || f == "--poll-interval")
		}
	}
	return false, false
}

// watchingSubcommands are subcommand words that wait until their job is
// done (gh run watch, kubectl wait, docker wait, aws … wait).
var watchingSubcommands = map[string]bool{"watch": true, "wait": true}

// setupCommands prepare a poll (cd /repo && …, echo ---; …): they are
// part of its owner, but a label names the command they prepare.
var setupCommands = map[string]bool{
	"cd": true, "pushd": true, "popd": true, "export": true, "set": true, "unset": true, "source": true, ".": true,
	"echo": true, "printf": true, "true": true, ":": true, "date": true, "clear": true,
}

// job reads a command that is not the wait: its words, less its wait
// options, are the owner; its subcommands may make it wait (gh run watch,
// kubectl rollout status).
func (sc *cmdScan) job(words []shWord) {
	name := baseName(sc.text(words[0]))
	sc.wait.owner = hash64.Mix(sc.wait.owner ^ hash64.String(name))
	labelled := len(sc.label) == 0 && !setupCommands[name]
	if labelled {
		sc.label = append(sc.label, baseName(sc.text(words[0]))...)
	}
	sub, prev := 0, ""
	skip := false
	for i, a := range words[1:] {
		w := sc.text(a)
		if skip {
			skip = false
			if _, ok := sleepSeconds(w); ok {
				continue // --interval's value is the wait's, not the job's
			}
		}
		if flag, next := waitFlag(w); flag {
			sc.wait.waits, skip = true, next
			continue
		}
		// The first words after the program, before any option, are its
		// subcommands.
		if sub == i && !strings.HasPrefix(w, "-") && sub < 3 {
			sub++
			if watchingSubcommands[w] || (prev == "rollout" && w == "status") {
				sc.wait.waits = true
			}
			if labelled && sub <= maxLabelWords && plainWord(w) {
				sc.label = append(append(sc.label, ' '), w...)
			} else {
				labelled = false
			}
			prev = w
		} else {
			labelled = false
		}
		sc.wait.owner = hash64.Mix(sc.wait.owner*0x100000001b3 ^ hash64.String(w))
	}
	sc.wait.owner = hash64.Mix(sc.wait.owner ^ 0x3b) // the command's end
}

// plainWord is a word a label may show: a lowercase name, no argument.
func plainWord(w string) bool {
	if w == "" || len(w) > 24 || w[0] < 'a' || w[0] > 'z' {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func baseName(w string) string {
	if i := strings.LastIndexByte(w, '/'); i >= 0 {
		return w[i+1:]
	}
	return w
}

// isAssignment reports NAME=value before a command word.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := w[i]
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// The lexer's tokens.
const (
	tokWord byte = iota + 1
	tokSep
	tokEnd
)

// shLexer splits a command line into words and separators.
type shLexer struct {
	src string
	pos int
}

// next appends the next word's unquoted text to buf and returns tokWord,
// or returns a separator (; & | ( ) newline) or the end. Redirections and
// their targets, and comments, are skipped.
func (lx *shLexer) next(buf []byte) ([]byte, byte) {
	for {
		for lx.pos < len(lx.src) && (lx.src[lx.pos] == ' ' || lx.src[lx.pos] == '\t' || lx.src[lx.pos] == '\r') {
			lx.pos++
		}
		if lx.pos >= len(lx.src) {
			return buf, tokEnd
		}
		switch c := lx.src[lx.pos]; c {
		case ';', '|', '(', ')', '\n':
			lx.pos++
			return buf, tokSep
		case '&':
			if lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '>' {
				lx.pos++
				lx.redirect()
				continue
			}
			lx.pos++
			return buf, tokSep
		case '<', '>':
			lx.redirect()
			continue
		case '#':
			for lx.pos < len(lx.src) && lx.src[lx.pos] != '\n' {
				lx.pos++
			}
			continue
		}
		start := len(buf)
		buf = lx.word(buf)
		// A file descriptor before a redirection (2>&1) is no word.
		if lx.pos < len(lx.src) && (lx.src[lx.pos] == '>' || lx.src[lx.pos] == '<') && allDigits(buf[start:]) {
			buf = buf[:start]
			lx.redirect()
			continue
		}
		return buf, tokWord
	}
}

// redirect skips a redirection operator (>, >>, >&, <, <<, &>) and its
// target word.
func (lx *shLexer) redirect() {
	for lx.pos < len(lx.src) && (lx.src[lx.pos] == '<' || lx.src[lx.pos] == '>' || lx.src[lx.pos] == '&') {
		lx.pos++
	}
	for lx.pos < len(lx.src) && (lx.src[lx.pos] == ' ' || lx.src[lx.pos] == '\t') {
		lx.pos++
	}
	var discard [64]byte
	lx.word(discard[:0])
}

// word reads one word at pos, appending its text without quotes to buf.
func (lx *shLexer) word(buf []byte) []byte {
	s := lx.src
	for lx.pos < len(s) {
		c := s[lx.pos]
		switch c {
		case ' ', '\t', '\r', '\n', ';', '&', '|', '(', ')', '<', '>':
			return buf
		case '\'':
			end := strings.IndexByte(s[lx.pos+1:], '\'')
			if end < 0 {
				end = len(s) - lx.pos - 1
			}
			buf = append(buf, s[lx.pos+1:lx.pos+1+end]...)
			lx.pos = min(lx.pos+end+2, len(s))
		case '"':
			lx.pos++
			for lx.pos < len(s) && s[lx.pos] != '"' {
				if s[lx.pos] == '\\' && lx.pos+1 < len(s) && strings.IndexByte("\"\\$`\n", s[lx.pos+1]) >= 0 {
					lx.pos++
				}
				buf = append(buf, s[lx.pos])
				lx.pos++
			}
			lx.pos++
		case '\\':
			if lx.pos+1 < len(s) && s[lx.pos+1] != '\n' {
				buf = append(buf, s[lx.pos+1])
			}
			lx.pos += 2
		case '$':
			if lx.pos+1 < len(s) && s[lx.pos+1] == '(' {
				end := closingParen(s, lx.pos+1)
				buf = append(buf, s[lx.pos:end]...)
				lx.pos = end
				continue
			}
			buf = append(buf, c)
			lx.pos++
		case '`':
			end := strings.IndexByte(s[lx.pos+1:], '`')
			if end < 0 {
				end = len(s) - lx.pos - 1
			}
			stop := min(lx.pos+2+end, len(s))
			buf = append(buf, s[lx.pos:stop]...)
			lx.pos = stop
		default:
			buf = append(buf, c)
			lx.pos++
		}
	}
	lx.pos = min(lx.pos, len(s))
	return buf
}

// closingParen is the index after the parenthesis that closes the one at
// open (quotes inside skipped), or the end of s.
func closingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1
			}
		case '\'', '"':
			if end := strings.IndexByte(s[i+1:], s[i]); end >= 0 {
				i += end + 1
			}
		}
	}
	return len(s)
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
