package engine

import (
	"encoding/json"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// Wait is what a call says about a job it polls: set only for a call that
// itself waits (a shell command with a sleep, a --wait, …) or a call of a
// background job's status tool. The engine grants such a poll an implicit
// lease while its result reports the job pending (rule_implicit_wait.go).
type Wait struct {
	// Owner digests the polled job: the command without its wait, or the
	// status tool and the job's id (0: the call polls nothing).
	Owner Digest
	// Label names the job in explanations: the polled program and its
	// subcommand words ("gh run view"), or the status tool and the job's
	// id — never a command's arguments.
	Label string
	// State is what the result says of the job.
	State JobState
}

// WaitReader recognises the calls that poll a job and reads their results
// (the command reader, wait_command.go; the status reader,
// wait_status.go). It is built from implicit_wait and safe for concurrent
// use; a nil reader reads nothing.
type WaitReader struct {
	// tools are the shell and the status tools.
	tools []pollTool
	// lens has bit n set when some tool's name is n bytes long (n < 64),
	// long when one is longer: most tools are told apart by the length of
	// their name alone.
	lens   uint64
	long   bool
	status statusReader
}

// pollTool is a shell tool and the argument that holds its command, or a
// status tool and the one that names its job.
type pollTool struct {
	name, key string
	status    bool
}

// NewWaitReader compiles cfg; nil when implicit waits are off.
func NewWaitReader(cfg ImplicitWaitConfig) *WaitReader {
	if !cfg.Enabled {
		return nil
	}
	r := &WaitReader{status: statusReader{pending: newValueSet(cfg.PendingStates), done: newValueSet(cfg.DoneStates)}}
	add := func(tool, key string, status bool) {
		if o, ok := cfg.Tools[tool]; tool == "" || key == "" || (ok && o.Enabled != nil && !*o.Enabled) {
			return
		}
		r.tools = append(r.tools, pollTool{name: tool, key: key, status: status})
		if len(tool) >= 64 {
			r.long = true
		} else {
			r.lens |= 1 << len(tool)
		}
	}
	for _, st := range cfg.StatusTools {
		add(st.Tool, st.IDKey, true)
	}
	for _, ct := range cfg.CommandTools {
		add(ct.Tool, ct.CommandKey, false)
	}
	return r
}

// lookup is tool's entry, nil for most tools at one bit test.
func (r *WaitReader) lookup(tool string) *pollTool {
	if n := len(tool); (n < 64 && r.lens&(1<<n) == 0) || (n >= 64 && !r.long) {
		return nil
	}
	for i := range r.tools {
		if r.tools[i].name == tool {
			return &r.tools[i]
		}
	}
	return nil
}

// Want is the one check every tool call pays: whether tool is a shell or
// a status tool (ok), and the argument its call is read for — a shell
// tool's command, a status tool's job id — which the caller finds in the
// canonical pass over the arguments (canon's Normalizer.SignatureMember). Most
// tools are turned away by the length of their name.
func (r *WaitReader) Want(tool string) (want string, ok bool) {
	if r == nil {
		return "", false
	}
	if pt := r.lookup(tool); pt != nil {
		return pt.key, true
	}
	return "", false
}

// PollCall is a call as the wait reader reads it.
type PollCall struct {
	// Tool is the tool's name.
	Tool string
	// Args are the arguments: JSON when ArgsJSON, else a command line as
	// text; Member is the raw JSON value of the member Want named, when
	// HasMember.
	Args      string
	ArgsJSON  bool
	Member    string
	HasMember bool
	// Result is the result, when HasResult; a Failed call's result says
	// nothing of the job.
	Result            string
	HasResult, Failed bool
}

// Read returns what a call says about a job it polls. A shell call
// without a wait word pays one search of its command (mayWait).
func (r *WaitReader) Read(c *PollCall) Wait {
	if r == nil {
		return Wait{}
	}
	pt := r.lookup(c.Tool)
	if pt == nil {
		return Wait{}
	}
	var w Wait
	if pt.status {
		w = statusPoll(c)
	} else {
		w = commandPoll(c)
	}
	if w.Owner != 0 && c.HasResult && !c.Failed {
		w.State = r.status.state(c.Result)
	}
	return w
}

// mayWait reports whether args has a word a waiting command line has:
// sleep, wait, watch, interval, timeout or rollout, each found by a rare
// byte of it ('p', 'w', 'v', 'u') and the byte beside that one. A generic
// search anchors on a word's first byte, and 's', 't' and 'i' are in most
// arguments: searching for each word cost a shell call more than the rest
// of its extraction. "timeout" and "interval" are also members of shell
// tools' arguments: they do not count where a quote closes them.
func mayWait(s string) bool {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], 'p')
		if j < 0 {
			break
		}
		if i += j; i >= 4 && s[i-1] == 'e' && s[i-4:i+1] == "sleep" {
			return true
		}
	}
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], 'w')
		if j < 0 {
			break
		}
		if i += j; i+1 < len(s) && s[i+1] == 'a' && (strings.HasPrefix(s[i:], "wait") || strings.HasPrefix(s[i:], "watch")) {
			return true
		}
	}
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], 'v')
		if j < 0 {
			break
		}
		if i += j; i >= 5 && s[i-1] == 'r' && s[i-5:min(i+3, len(s))] == "interval" && !closedByQuote(s, i+3) {
			return true
		}
	}
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], 'u')
		if j < 0 {
			break
		}
		if i += j; i >= 5 && s[i-1] == 'o' && i+2 <= len(s) {
			if w := s[i-5 : i+2]; (w == "timeout" && !closedByQuote(s, i+2)) || w == "rollout" {
				return true
			}
		}
	}
	return false
}

// closedByQuote reports a quote (maybe escaped) at s[end]: a word that is
// a JSON member's name.
func closedByQuote(s string, end int) bool {
	return end < len(s) && (s[end] == '"' || s[end] == '\\')
}

// commandPoll reads a shell tool's command for a wait and the job it polls.
func commandPoll(c *PollCall) Wait {
	var cw commandWait
	switch {
	case !c.ArgsJSON:
		if !mayWait(c.Args) {
			return Wait{}
		}
		cw = readCommand(c.Args)
	case !c.HasMember:
		return Wait{}
	default:
		if raw := strings.TrimSpace(c.Member); raw != "" && raw[0] == '"' {
			if !mayWait(raw) {
				return Wait{}
			}
			line, _ := jsonString(raw)
			cw = readCommand(line)
		} else if argv, isArgv := jsonStrings(raw); isArgv {
			cw = readArgv(argv)
		}
	}
	if !cw.waits || cw.owner == 0 {
		return Wait{}
	}
	label := cw.label
	if label == "" {
		label = c.Tool
	}
	return Wait{Owner: Digest(hash64.Mix(xxhash.Sum64String(c.Tool) ^ cw.owner)), Label: label}
}

// statusPoll reads a status tool's call: the job is the member Want named.
func statusPoll(c *PollCall) Wait {
	if !c.ArgsJSON || !c.HasMember {
		return Wait{}
	}
	id, isString := jsonString(c.Member)
	if !isString {
		id = strings.TrimSpace(c.Member) // a number: Gemini CLI's pid
	}
	if id == "" || id == "null" {
		return Wait{}
	}
	label := c.Tool
	if len(id) <= 32 && plainID(id) {
		label = c.Tool + " " + id
	}
	return Wait{Owner: Digest(hash64.Mix(xxhash.Sum64String(c.Tool) ^ hash64.Mix(xxhash.Sum64String(id)^ownerSeed))), Label: label}
}

// plainID is a job id an explanation may show: letters, digits, '-', '_'.
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// jsonString decodes a raw JSON string.
func jsonString(raw string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], true
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return "", false
	}
	return s, true
}

// jsonStrings decodes a raw JSON array of strings.
func jsonStrings(raw string) ([]string, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw[0] != '[' {
		return nil, false
	}
	var argv []string
	if json.Unmarshal([]byte(raw), &argv) != nil || len(argv) == 0 {
		return nil, false
	}
	return argv, true
}
