// Package sessions writes a history of agent sessions to audit: copies of
// the sessions the real CLIs wrote in cmd/loopreplay/testdata (Claude Code
// session transcripts with their subagents, `claude -p` stream-json
// output, Gemini CLI session files, Claude Code's own OTLP export, Codex
// CLI rollout files, Qwen Code session files and `opencode export`
// documents), each copy a session of its own (every id made new: UUIDs,
// OTLP trace and span ids, OpenCode's ses_, msg_ and prt_ ids) at its own
// time (RFC 3339 timestamps, OTLP's Unix nanoseconds, OpenCode's Unix
// milliseconds), laid out as the CLIs keep them. loopreplay's audit benchmark (make bench-audit)
// and its streaming tests read them.
package sessions

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is the CLI and format of a generated session.
type Kind uint8

// The kinds of session written, in the order Mix counts them.
const (
	ClaudeSession Kind = iota
	StreamJSON
	GeminiSession
	OTLP
	CodexSession
	QwenSession
	OpenCodeExport
	kinds
)

func (k Kind) String() string {
	return [...]string{"claude_code_session", "claude_code_stream_json", "gemini_cli_session", "otlp_json",
		"codex_cli_session", "qwen_code_session", "opencode_export"}[k]
}

// Options shape a history.
type Options struct {
	// Testdata is cmd/loopreplay/testdata, where the recorded sessions are.
	Testdata string
	// Sessions is how many to write.
	Sessions int
	// Mix is how many of each Kind come in every round of sum(Mix)
	// sessions. Default DefaultMix.
	Mix [kinds]int
	// Spacing is the time from one session's start to the next one's
	// (0: every session at the same time). Default none.
	Spacing time.Duration
	// Start is the first session's start. Default 2026-11-01 09:00 UTC.
	Start time.Time
	// NoisyEvery puts a shell's complaints before the JSON of every
	// NoisyEvery-th stream-json output, as a capture from a shell without
	// a terminal has them (0: none).
	NoisyEvery int
}

// DefaultMix writes, per 20 sessions, 6 Claude Code session transcripts,
// 5 stream-json outputs, 3 Gemini CLI session files, 1 OTLP capture, 2
// Codex CLI rollout files, 2 Qwen Code session files and 1 OpenCode
// export: some 200 MB for 1,000 sessions (BENCHMARKS-audit.md has the
// size). The Claude Code transcripts, some 450 kB each with their
// subagents', make up for the newer CLIs' sessions of 35 to 50 kB.
var DefaultMix = [kinds]int{6, 5, 3, 1, 2, 2, 1}

// ShellNoise is what bash prints when started without a terminal.
const ShellNoise = "bash: cannot set terminal process group (-1): Inappropriate ioctl for device\nbash: no job control in this shell\n"

// File is one generated input: what loopreplay is given (a Claude Code
// session's subagent transcripts lie beside it and are not listed).
type File struct {
	Path string
	Kind Kind
	// Bytes counts it and the files read with it.
	Bytes int64
	// Noisy says it begins with ShellNoise.
	Noisy bool
	// From is the recorded file it is a copy of.
	From string
}

// template is one recorded session: its files, relative to its base.
type template struct {
	kind  Kind
	base  string
	files []string
}

// Generate writes opts.Sessions sessions under dir.
func Generate(dir string, opts Options) ([]File, error) {
	if opts.Mix == ([kinds]int{}) {
		opts.Mix = DefaultMix
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	}
	tpls, err := templates(opts.Testdata)
	if err != nil {
		return nil, err
	}
	var order []Kind
	for k := Kind(0); k < kinds; k++ {
		for range opts.Mix[k] {
			order = append(order, k)
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("sessions: an empty mix")
	}
	// Interleave the kinds within a round, so any prefix is mixed too.
	sort.SliceStable(order, func(i, j int) bool { return rank(order, i) < rank(order, j) })
	seen := [kinds]int{}
	streams := 0
	files := make([]File, 0, opts.Sessions)
	for i := range opts.Sessions {
		k := order[i%len(order)]
		tpl := tpls[k][seen[k]%len(tpls[k])]
		seen[k]++
		c := copyOf{n: i, start: opts.Start.Add(time.Duration(i) * opts.Spacing)}
		noisy := false
		if k == StreamJSON {
			streams++
			noisy = opts.NoisyEvery > 0 && streams%opts.NoisyEvery == 0
		}
		f, err := c.write(dir, tpl, noisy)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// rank spreads each kind's sessions over a round: the j-th of a kind's n
// sits at (j+0.5)/n of it.
func rank(order []Kind, i int) float64 {
	j, n := 0, 0
	for x, k := range order {
		if k == order[i] {
			if x < i {
				j++
			}
			n++
		}
	}
	return (float64(j) + 0.5) / float64(n)
}

// templates lists the recorded sessions of each kind, in name order.
func templates(testdata string) ([kinds][]template, error) {
	var t [kinds][]template
	sessions, err := filepath.Glob(filepath.Join(testdata, "transcripts", "*", "*-*-*-*-*.jsonl.gz"))
	if err != nil {
		return t, err
	}
	for _, s := range sessions {
		base := filepath.Dir(s)
		files := []string{filepath.Base(s)}
		subs, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(s, ".jsonl.gz"), "subagents", "*"))
		for _, sub := range subs {
			rel, _ := filepath.Rel(base, sub)
			files = append(files, rel)
		}
		t[ClaudeSession] = append(t[ClaudeSession], template{ClaudeSession, base, files})
	}
	streams, _ := filepath.Glob(filepath.Join(testdata, "transcripts", "*", "stream-json.jsonl.gz"))
	for _, s := range streams {
		t[StreamJSON] = append(t[StreamJSON], template{StreamJSON, filepath.Dir(s), []string{filepath.Base(s)}})
	}
	geminis, _ := filepath.Glob(filepath.Join(testdata, "gemini-cli", "*", "session-*.jsonl"))
	for _, s := range geminis {
		t[GeminiSession] = append(t[GeminiSession], template{GeminiSession, filepath.Dir(s), []string{filepath.Base(s)}})
	}
	for _, s := range []string{"logs.jsonl", "logs-and-traces.jsonl"} {
		t[OTLP] = append(t[OTLP], template{OTLP, filepath.Join(testdata, "claude-code"), []string{s}})
	}
	for k, pat := range map[Kind]string{
		CodexSession:   filepath.Join(testdata, "codex-cli", "*", "rollout-*.jsonl"),
		QwenSession:    filepath.Join(testdata, "qwen-code", "*", "*-*-*-*-*.jsonl"),
		OpenCodeExport: filepath.Join(testdata, "opencode", "*", "ses_*.json"),
	} {
		m, _ := filepath.Glob(pat)
		for _, s := range m {
			t[k] = append(t[k], template{k, filepath.Dir(s), []string{filepath.Base(s)}})
		}
	}
	for k := Kind(0); k < kinds; k++ {
		if len(t[k]) == 0 {
			return t, fmt.Errorf("sessions: no recorded %s under %s", k, testdata)
		}
	}
	return t, nil
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	nanosRE = regexp.MustCompile(`("(?:time|observedTime|startTime|endTime)UnixNano":")(\d+)"`)
	idRE    = regexp.MustCompile(`("(?:traceId|spanId|parentSpanId)":")([0-9a-f]+)"`)
	// OpenCode's ids: its session's (the key a replay reads it by), its
	// messages' and its parts'; and its times, Unix milliseconds.
	openCodeIDRE = regexp.MustCompile(`\b(?:ses|msg|prt)_[0-9A-Za-z]{20,}`)
	millisRE     = regexp.MustCompile(`("(?:created|updated|completed|start|end)":\s*)(\d{13})\b`)
	// Codex CLI's turn times, Unix seconds (no replay reads them; they
	// move with the rest, and do not set the start).
	secondsRE = regexp.MustCompile(`("(?:started_at|completed_at|create_time)":)(\d{10}(?:\.\d{1,9})?)\b`)
)

// copyOf makes the n-th session from a template: new ids, its own start.
type copyOf struct {
	n     int
	start time.Time
	shift time.Duration
	ids   map[string]string
}

func (c *copyOf) write(dir string, tpl template, noisy bool) (File, error) {
	parsed := make([]*parsedFile, len(tpl.files))
	var first time.Time
	for i, name := range tpl.files {
		p, err := parse(filepath.Join(tpl.base, name))
		if err != nil {
			return File{}, err
		}
		parsed[i] = p
		if !p.first.IsZero() && (first.IsZero() || p.first.Before(first)) {
			first = p.first
		}
	}
	c.shift = c.start.Sub(first)
	c.ids = map[string]string{}
	main := c.rewrite(parsed[0])
	// The session's id: a Claude Code, Codex CLI or Qwen Code session's
	// file name, else the first id the file holds (Gemini CLI's sessionId
	// comes first); an OpenCode export's ses_ id.
	var id string
	if tpl.kind == OpenCodeExport {
		id = c.openCodeID(strings.TrimSuffix(tpl.files[0], ".json"))
	} else {
		id = c.id(uuidRE.FindString(tpl.files[0] + " " + parsed[0].firstID))
	}
	var path string
	switch tpl.kind {
	case ClaudeSession:
		path = filepath.Join(dir, "claude", "projects", fmt.Sprintf("-home-dev-project-%02d", c.n%10), id+".jsonl")
	case StreamJSON:
		path = filepath.Join(dir, "stream-json", fmt.Sprintf("run-%04d.jsonl", c.n))
	case GeminiSession:
		path = filepath.Join(dir, "gemini", "tmp", fmt.Sprintf("project-%02d", c.n%10), "chats",
			fmt.Sprintf("session-%s-%s.jsonl", c.start.Format("2006-01-02T15-04"), id[:8]))
	case OTLP:
		path = filepath.Join(dir, "otlp", fmt.Sprintf("capture-%04d.jsonl", c.n))
	case CodexSession:
		path = filepath.Join(dir, "codex", "sessions", c.start.Format("2006/01/02"),
			fmt.Sprintf("rollout-%s-%s.jsonl", c.start.Format("2006-01-02T15-04-05"), id))
	case QwenSession:
		path = filepath.Join(dir, "qwen", "projects", fmt.Sprintf("-home-dev-project-%02d", c.n%10), "chats", id+".jsonl")
	case OpenCodeExport:
		path = filepath.Join(dir, "opencode", id+".json")
	}
	if noisy {
		main = append([]byte(ShellNoise), main...)
	}
	f := File{Path: path, Kind: tpl.kind, Noisy: noisy, From: filepath.Join(tpl.base, tpl.files[0])}
	if err := writeFile(path, main); err != nil {
		return f, err
	}
	f.Bytes += int64(len(main))
	// A session's subagents, in <session>/subagents/ beside it.
	for i, name := range tpl.files[1:] {
		rel := strings.TrimSuffix(name, ".gz")
		rel = filepath.Join(id, strings.SplitN(filepath.ToSlash(rel), "/", 2)[1])
		b := c.rewrite(parsed[i+1])
		if err := writeFile(filepath.Join(filepath.Dir(path), rel), b); err != nil {
			return f, err
		}
		f.Bytes += int64(len(b))
	}
	return f, nil
}

// parsedFile is a recorded file cut at what each copy rewrites: the text
// between, and the ids and times.
type parsedFile struct {
	pieces  []piece
	tail    []byte
	first   time.Time
	firstID string
	size    int
}

// piece is the text before a rewritten value, and the value.
type piece struct {
	lit  []byte
	kind pieceKind
	// val is the value as recorded; at its time (layout: its format);
	// nanos a Unix time's, in nanoseconds (decimals: a time in seconds'
	// digits after the point).
	val      string
	at       time.Time
	layout   string
	nanos    int64
	decimals int
}

type pieceKind uint8

const (
	pieceUUID pieceKind = iota
	pieceHexID
	pieceTime
	pieceNanos
	pieceMillis
	pieceSeconds
	pieceOpenCodeID
)

var parsedFiles = map[string]*parsedFile{}

// parse reads and cuts a recorded file once.
func parse(path string) (*parsedFile, error) {
	if p, ok := parsedFiles[path]; ok {
		return p, nil
	}
	b, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	ms := matches(b)
	sort.Slice(ms, func(i, j int) bool { return ms[i].from < ms[j].from })
	p := &parsedFile{size: len(b)}
	at := 0
	for _, m := range ms {
		if m.from < at {
			continue // inside a value already cut
		}
		m.p.lit = b[at:m.from]
		at = m.to
		p.pieces = append(p.pieces, m.p)
		var t time.Time
		switch m.p.kind {
		case pieceTime:
			t = m.p.at
		case pieceNanos, pieceMillis:
			t = time.Unix(0, m.p.nanos).UTC()
		case pieceUUID:
			if p.firstID == "" {
				p.firstID = m.p.val
			}
		}
		if !t.IsZero() && (p.first.IsZero() || t.Before(p.first)) {
			p.first = t
		}
	}
	p.tail = b[at:]
	parsedFiles[path] = p
	return p, nil
}

// match is a value a copy rewrites, at b[from:to] of its file.
type match struct {
	from, to int
	p        piece
}

// matches are the values of b a copy rewrites, in no order, some inside
// others.
func matches(b []byte) []match {
	var ms []match
	for _, m := range uuidRE.FindAllIndex(b, -1) {
		ms = append(ms, match{m[0], m[1], piece{kind: pieceUUID, val: string(b[m[0]:m[1]])}})
	}
	for _, m := range idRE.FindAllSubmatchIndex(b, -1) {
		ms = append(ms, match{m[4], m[5], piece{kind: pieceHexID, val: string(b[m[4]:m[5]])}})
	}
	for _, m := range timeRE.FindAllIndex(b, -1) {
		v := string(b[m[0]:m[1]])
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			continue
		}
		layout := "2006-01-02T15:04:05Z"
		if i := strings.IndexByte(v, '.'); i >= 0 {
			layout = "2006-01-02T15:04:05." + strings.Repeat("0", len(v)-i-2) + "Z"
		}
		ms = append(ms, match{m[0], m[1], piece{kind: pieceTime, at: t, layout: layout}})
	}
	for _, m := range nanosRE.FindAllSubmatchIndex(b, -1) {
		v, err := strconv.ParseInt(string(b[m[4]:m[5]]), 10, 64)
		if err != nil || v <= 0 {
			continue
		}
		ms = append(ms, match{m[4], m[5], piece{kind: pieceNanos, nanos: v}})
	}
	for _, m := range openCodeIDRE.FindAllIndex(b, -1) {
		ms = append(ms, match{m[0], m[1], piece{kind: pieceOpenCodeID, val: string(b[m[0]:m[1]])}})
	}
	for _, m := range millisRE.FindAllSubmatchIndex(b, -1) {
		v, err := strconv.ParseInt(string(b[m[4]:m[5]]), 10, 64)
		if err != nil || v <= 0 {
			continue
		}
		ms = append(ms, match{m[4], m[5], piece{kind: pieceMillis, nanos: v * int64(time.Millisecond)}})
	}
	for _, m := range secondsRE.FindAllSubmatchIndex(b, -1) {
		sec, frac, _ := strings.Cut(string(b[m[4]:m[5]]), ".")
		v, err := strconv.ParseInt(sec+frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil || v <= 0 {
			continue
		}
		ms = append(ms, match{m[4], m[5], piece{kind: pieceSeconds, nanos: v, decimals: len(frac)}})
	}
	return ms
}

// rewrite gives a recorded file this copy's ids and times.
func (c *copyOf) rewrite(p *parsedFile) []byte {
	out := make([]byte, 0, p.size+p.size/8)
	for i := range p.pieces {
		pc := &p.pieces[i]
		out = append(out, pc.lit...)
		switch pc.kind {
		case pieceUUID:
			out = append(out, c.id(pc.val)...)
		case pieceHexID:
			h := c.hash(pc.val)
			out = hex.AppendEncode(out, h[:len(pc.val)/2])
		case pieceTime:
			out = pc.at.Add(c.shift).UTC().AppendFormat(out, pc.layout)
		case pieceNanos:
			out = strconv.AppendInt(out, pc.nanos+int64(c.shift), 10)
		case pieceMillis:
			out = strconv.AppendInt(out, (pc.nanos+int64(c.shift))/int64(time.Millisecond), 10)
		case pieceSeconds:
			v := pc.nanos + int64(c.shift)
			out = strconv.AppendInt(out, v/int64(time.Second), 10)
			if pc.decimals > 0 {
				frac := fmt.Sprintf("%09d", v%int64(time.Second))
				out = append(append(out, '.'), frac[:pc.decimals]...)
			}
		case pieceOpenCodeID:
			out = append(out, c.openCodeID(pc.val)...)
		}
	}
	return append(out, p.tail...)
}

// id is the copy's UUID for a template's.
func (c *copyOf) id(uuid string) string {
	if v, ok := c.ids[uuid]; ok {
		return v
	}
	h := c.hash(uuid)
	s := hex.EncodeToString(h[:16])
	v := s[:8] + "-" + s[8:12] + "-4" + s[13:16] + "-a" + s[17:20] + "-" + s[20:32]
	c.ids[uuid] = v
	return v
}

// openCodeID is the copy's OpenCode id for a template's: its prefix (ses_,
// msg_, prt_), then as many characters, hex for the 12 OpenCode makes of
// the time, base 62 for the random rest.
func (c *copyOf) openCodeID(id string) string {
	if v, ok := c.ids[id]; ok {
		return v
	}
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	h := c.hash(id)
	prefix, rest, _ := strings.Cut(id, "_")
	b := []byte(prefix + "_")
	for i := range len(rest) {
		if i < 12 {
			b = append(b, "0123456789abcdef"[h[i%32]&15])
		} else {
			b = append(b, base62[int(h[i%32])%62])
		}
	}
	c.ids[id] = string(b)
	return string(b)
}

func (c *copyOf) hash(s string) [32]byte {
	return sha256.Sum256([]byte(strconv.Itoa(c.n) + "\x00" + s))
}

// earliest is the earliest time a template holds: an RFC 3339 timestamp,
// an OTLP Unix-nanosecond one or an OpenCode Unix-millisecond one.
func earliest(b []byte) (time.Time, bool) {
	var first time.Time
	for _, m := range timeRE.FindAll(b, -1) {
		if t, err := time.Parse(time.RFC3339Nano, string(m)); err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for _, m := range nanosRE.FindAllSubmatch(b, -1) {
		if v, err := strconv.ParseInt(string(m[2]), 10, 64); err == nil && v > 0 {
			if t := time.Unix(0, v).UTC(); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	for _, m := range millisRE.FindAllSubmatch(b, -1) {
		if v, err := strconv.ParseInt(string(m[2]), 10, 64); err == nil && v > 0 {
			if t := time.UnixMilli(v).UTC(); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	return first, !first.IsZero()
}

func readMaybeGzip(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return b, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
