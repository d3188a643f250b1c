package engine

import (
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// readPoll reads a call as the extractor does: the members the reader
// wants found by the canonical pass over the arguments.
func readPoll(r *WaitReader, n *canon.Normalizer, tool, args string, argsJSON bool, result string, hasResult, failed bool) Wait {
	want, ok := r.Want(tool)
	if !ok {
		return Wait{}
	}
	_, q, member, found := n.SignatureMember(tool, args, true, want)
	return r.Read(&PollCall{
		Tool: tool, Args: args, ArgsJSON: argsJSON && q == canon.ArgsJSON, Member: member, HasMember: found,
		Result: result, HasResult: hasResult, Failed: failed,
	})
}

// TestWaitReaderOwners: which calls are polls, and whose.
func TestWaitReaderOwners(t *testing.T) {
	r := NewWaitReader(defaultImplicitWait())
	n := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	poll := func(tool, args, result string) Wait {
		return readPoll(r, n, tool, args, true, result, result != "", false)
	}
	const pending = `{"status":"in_progress"}`

	ci := poll("Bash", `{"command":"sleep 30 && gh run view 4242 --json status,conclusion","description":"Wait, then check CI"}`, pending)
	if ci.Owner == 0 || ci.Label != "gh run view" || ci.State != JobPending {
		t.Fatalf("CI poll: %+v", ci)
	}
	for _, tc := range []struct {
		name, tool, args string
		argsJSON         bool
		same             bool
	}{
		{"another description", "Bash", `{"command":"sleep 30 && gh run view 4242 --json status,conclusion","description":"Poll again"}`, true, true},
		{"a longer wait", "Bash", `{"command":"sleep 90 && gh run view 4242 --json status,conclusion"}`, true, true},
		{"escapes in the command", "Bash", `{"command":"sleep 30 && gh run view \"4242\" --json status,conclusion"}`, true, true},
		{"the command as text (Claude Code's full_command)", "Bash", "sleep 30 && gh run view 4242 --json status,conclusion", false, true},
		{"another shell tool", "run_shell_command", `{"command":"sleep 30 && gh run view 4242 --json status,conclusion"}`, true, false},
		{"another run", "Bash", `{"command":"sleep 30 && gh run view 4243 --json status,conclusion"}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := readPoll(r, n, tc.tool, tc.args, tc.argsJSON, pending, true, false)
			if w.Owner == 0 {
				t.Fatalf("no owner for %s %s", tc.tool, tc.args)
			}
			if (w.Owner == ci.Owner) != tc.same {
				t.Fatalf("same owner as the CI poll: %v, want %v", w.Owner == ci.Owner, tc.same)
			}
		})
	}

	// A command given as a word array (Codex CLI's shell tool).
	if w := poll("shell", `{"command":["bash","-lc","sleep 10 && gh run view 4242"],"workdir":"/repo"}`, pending); w.Owner == 0 || w.Label != "gh run view" {
		t.Fatalf("argv command: %+v", w)
	}
	// Status tools: the job is the id argument.
	a := poll("TaskOutput", `{"task_id":"bq1x9f","block":true,"timeout":30000}`, "<status>running</status>")
	b := poll("TaskOutput", `{"task_id":"bq1x9f","block":false,"timeout":0}`, "<status>running</status>")
	c := poll("TaskOutput", `{"task_id":"zz7","block":true,"timeout":30000}`, "<status>running</status>")
	if a.Owner == 0 || a.Owner != b.Owner || a.Owner == c.Owner || a.Label != "TaskOutput bq1x9f" || a.State != JobPending {
		t.Fatalf("status tool owners: %+v %+v %+v", a, b, c)
	}
	if w := poll("read_background_output", `{"pid":4711,"delay_ms":5000}`, "Progress: 40% (build)"); w.Owner == 0 || w.Label != "read_background_output 4711" || w.State != JobPending {
		t.Fatalf("Gemini CLI status tool: %+v", w)
	}
	// A label never shows an id that is not plain.
	if w := poll("TaskOutput", `{"task_id":"../../etc/passwd"}`, ""); w.Label != "TaskOutput" {
		t.Fatalf("label of an odd id: %q", w.Label)
	}

	// Not polls.
	for _, tc := range []struct{ name, tool, args string }{
		{"a tool that is neither", "Read", `{"file_path":"/repo/sleep.go"}`},
		{"a shell call without a wait", "Bash", `{"command":"gh run view 4242 --json status,conclusion"}`},
		{"a shell call with the word only in its description", "Bash", `{"command":"gh run view 4242","description":"sleep on it"}`},
		{"a bare sleep", "Bash", `{"command":"sleep 30"}`},
		{"no command member", "Bash", `{"cmd":"sleep 30 && make status"}`},
		{"a command member below the top", "Bash", `{"input":{"command":"sleep 30 && make status"}}`},
		{"a status tool without its id", "TaskOutput", `{"block":true}`},
		{"a status tool with a null id", "TaskOutput", `{"task_id":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := poll(tc.tool, tc.args, pending); w.Owner != 0 {
				t.Fatalf("%s %s read as a poll: %+v", tc.tool, tc.args, w)
			}
		})
	}

	// The result: only a recorded, successful one says anything of the job.
	args := `{"command":"sleep 30 && gh run view 4242 --json status,conclusion"}`
	if w := readPoll(r, n, "Bash", args, true, pending, false, false); w.State != JobUnknown {
		t.Fatalf("no result recorded: %s", w.State)
	}
	if w := readPoll(r, n, "Bash", args, true, pending, true, true); w.State != JobUnknown {
		t.Fatalf("a failed poll: %s", w.State)
	}
}

// TestWaitReaderConfig: the tools come from implicit_wait; off is nil.
func TestWaitReaderConfig(t *testing.T) {
	cfg := defaultImplicitWait()
	cfg.Enabled = false
	if r := NewWaitReader(cfg); r != nil {
		t.Fatal("implicit waits off still read polls")
	}
	if _, ok := (*WaitReader)(nil).Want("Bash"); ok {
		t.Fatal("implicit waits off still read polls")
	}
	cfg = defaultImplicitWait()
	off := false
	cfg.Tools = map[string]ImplicitWaitOverride{"Bash": {Enabled: &off}}
	cfg.CommandTools = append(cfg.CommandTools, CommandTool{Tool: "sandbox_exec", CommandKey: "script"})
	cfg.StatusTools = append(cfg.StatusTools, StatusTool{Tool: "job_status", IDKey: "job"})
	r := NewWaitReader(cfg)
	for tool, want := range map[string]bool{
		"Bash": false, "run_shell_command": true, "sandbox_exec": true, "job_status": true, "TaskOutput": true,
		"Read": false, "Edit": false, strings.Repeat("x", 80): false,
	} {
		if _, got := r.Want(tool); got != want {
			t.Fatalf("Want(%q) = %v, want %v", tool, got, want)
		}
	}
	if w := readPoll(r, canon.NewNormalizer(canon.DefaultNormalizerConfig()), "sandbox_exec", `{"script":"sleep 20; make status"}`, true, `{"status":"running"}`, true, false); w.Owner == 0 || w.State != JobPending {
		t.Fatalf("configured shell tool: %+v", w)
	}
	if w := readPoll(r, canon.NewNormalizer(canon.DefaultNormalizerConfig()), "exec_command", `{"cmd":"sleep 20 && gh run view 1"}`, true, `{"status":"queued"}`, true, false); w.Owner == 0 || w.State != JobPending {
		t.Fatalf("Codex CLI's exec_command: %+v", w)
	}
	if w := readPoll(r, canon.NewNormalizer(canon.DefaultNormalizerConfig()), "job_status", `{"job":"deploy-9"}`, true, `{"state":"deploying"}`, true, false); w.Owner == 0 || w.State != JobPending {
		t.Fatalf("configured status tool: %+v", w)
	}
}

var sinkWait Wait

// BenchmarkWaitRead is what reading a call for a poll costs beside the
// canonical pass over its arguments (which finds its command): the check
// every call pays (a tool that is neither a shell nor a status tool), a
// shell call without a wait word, and the reading of a poll.
func BenchmarkWaitRead(b *testing.B) {
	r := NewWaitReader(defaultImplicitWait())
	n := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	result := `{"conclusion":"","status":"in_progress"}`
	for _, bc := range []struct{ name, tool, args string }{
		{"tool=read_file", "read_file", `{"path":"src/pkg/file_1.go","offset":0,"limit":200}`},
		{"tool=Bash/no-wait", "Bash", `{"command":"go test ./... 2>&1 | tail -20","description":"Run the tests","timeout":120000}`},
		{"tool=Bash/poll", "Bash", `{"command":"sleep 30 && gh run view 4242 --json status,conclusion","description":"Wait, then check the CI run"}`},
	} {
		want, _ := r.Want(bc.tool)
		_, _, member, found := n.SignatureMember(bc.tool, bc.args, true, want)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sinkWait = Wait{}
				if _, ok := r.Want(bc.tool); ok {
					sinkWait = r.Read(&PollCall{Tool: bc.tool, Args: bc.args, ArgsJSON: true, Member: member, HasMember: found, Result: result, HasResult: true})
				}
			}
		})
	}
}
