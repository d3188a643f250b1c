package engine

import (
	"encoding/json"
	"strings"

	"github.com/cespare/xxhash/v2"
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
	commandTools []string
	statusTools  []StatusTool
	// lens has bit n set when some command or status tool's name is n
	// bytes long (n < 64), long when one is longer: most tools are told
	// apart by the length of their name alone.
	lens   uint64
	long   bool
	status statusReader
}

// NewWaitReader compiles cfg; nil when implicit waits are off.
func NewWaitReader(cfg ImplicitWaitConfig) *WaitReader {
	if !cfg.Enabled {
		return nil
	}
	r := &WaitReader{status: statusReader{pending: newValueSet(cfg.PendingStates), done: newValueSet(cfg.DoneStates)}}
	off := func(tool string) bool {
		o, ok := cfg.Tools[tool]
		return ok && o.Enabled != nil && !*o.Enabled
	}
	note := func(tool string) {
		if len(tool) >= 64 {
			r.long = true
		} else {
			r.lens |= 1 << len(tool)
		}
	}
	for _, t := range cfg.CommandTools {
		if t != "" && !off(t) {
			r.commandTools = append(r.commandTools, t)
			note(t)
		}
	}
	for _, st := range cfg.StatusTools {
		if st.Tool != "" && st.IDKey != "" && !off(st.Tool) {
			r.statusTools = append(r.statusTools, st)
			note(st.Tool)
		}
	}
	return r
}

// MayPoll is the one check every tool call pays: whether tool is a command
// or a status tool. Most names are turned away by their length.
func (r *WaitReader) MayPoll(tool string) bool {
	if r == nil {
		return false
	}
	if n := len(tool); (n < 64 && r.lens&(1<<n) == 0) || (n >= 64 && !r.long) {
		return false
	}
	return r.isCommandTool(tool) || r.statusTool(tool) != nil
}

func (r *WaitReader) isCommandTool(tool string) bool {
	for _, t := range r.commandTools {
		if t == tool {
			return true
		}
	}
	return false
}

func (r *WaitReader) statusTool(tool string) *StatusTool {
	for i := range r.statusTools {
		if r.statusTools[i].Tool == tool {
			return &r.statusTools[i]
		}
	}
	return nil
}

// Read returns what a call of tool says about a job it polls: args are its
// arguments (JSON when argsJSON, else a command line as text), result its
// result when hasResult. A failed call's result says nothing of the job.
func (r *WaitReader) Read(tool, args string, argsJSON bool, result string, hasResult, failed bool) Wait {
	if r == nil {
		return Wait{}
	}
	var w Wait
	if st := r.statusTool(tool); st != nil {
		w = statusPoll(tool, st.IDKey, args, argsJSON)
	} else if r.isCommandTool(tool) {
		w = commandPoll(tool, args, argsJSON)
	}
	if w.Owner != 0 && hasResult && !failed {
		w.State = r.status.state(result)
	}
	return w
}

// commandKeys are the argument members that hold a shell tool's command.
var commandKeys = [...]string{"command", "cmd", "full_command", "script"}

// waitWords are in every command line the command reader finds waiting;
// a line without any is not read further.
var waitWords = [...]string{"sleep", "wait", "watch", "timeout", "interval", "rollout"}

// commandPoll reads a shell tool's command for a wait and the job it polls.
func commandPoll(tool, args string, argsJSON bool) Wait {
	found := false
	for _, w := range waitWords {
		if strings.Contains(args, w) {
			found = true
			break
		}
	}
	if !found {
		return Wait{}
	}
	var cw commandWait
	switch {
	case !argsJSON:
		cw = readCommand(args)
	default:
		raw, ok := firstMember(args, commandKeys[:])
		if !ok {
			return Wait{}
		}
		if line, isString := jsonString(raw); isString {
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
		label = tool
	}
	return Wait{Owner: Digest(mix(xxhash.Sum64String(tool) ^ cw.owner)), Label: label}
}

// statusPoll reads a status tool's call: the job is the member idKey.
func statusPoll(tool, idKey, args string, argsJSON bool) Wait {
	if !argsJSON {
		return Wait{}
	}
	raw, ok := firstMember(args, []string{idKey})
	if !ok {
		return Wait{}
	}
	id, isString := jsonString(raw)
	if !isString {
		id = strings.TrimSpace(raw) // a number: Gemini CLI's pid
	}
	if id == "" || id == "null" {
		return Wait{}
	}
	label := tool
	if len(id) <= 32 && plainID(id) {
		label = tool + " " + id
	}
	return Wait{Owner: Digest(mix(xxhash.Sum64String(tool) ^ mix(xxhash.Sum64String(id)^ownerSeed))), Label: label}
}

// plainID is a job id an explanation may show: letters, digits, '-', '_'.
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// firstMember is the raw value of the first of keys that args, a JSON
// object, has at its top level.
func firstMember(args string, keys []string) (string, bool) {
	for _, k := range keys {
		if raw, ok := memberRaw(strings.TrimSpace(args), k); ok {
			return raw, true
		}
	}
	return "", false
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
