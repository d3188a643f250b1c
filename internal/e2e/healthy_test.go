//go:build unix

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// Healthy sessions that look like loops to a naive detector: the same test
// command again and again while the code changes, a re-run, CI polled with
// sleeps, a background job polled until done. Under the supervisor with
// its hook, none may have a call blocked or be killed.

// toolset writes a session in one CLI's tool names.
type toolset struct {
	shell func(command string) agentcli.Turn
	write func(path, content string) agentcli.Turn
	read  func(path string) agentcli.Turn
	edit  func(path, old, new string) agentcli.Turn
	grep  func(pattern, path string) agentcli.Turn
}

var claudeTools = toolset{
	shell: agentcli.Bash,
	write: func(path, content string) agentcli.Turn {
		return agentcli.Call("Write", map[string]any{"file_path": path, "content": content})
	},
	read: func(path string) agentcli.Turn { return agentcli.Call("Read", map[string]any{"file_path": path}) },
	edit: func(path, old, new string) agentcli.Turn {
		return agentcli.Call("Edit", map[string]any{"file_path": path, "old_string": old, "new_string": new})
	},
	grep: func(pattern, path string) agentcli.Turn {
		return agentcli.Call("Grep", map[string]any{"pattern": pattern, "path": path})
	},
}

var geminiTools = toolset{
	shell: agentcli.Shell,
	write: func(path, content string) agentcli.Turn {
		return agentcli.Call("write_file", map[string]any{"file_path": path, "content": content})
	},
	read: func(path string) agentcli.Turn { return agentcli.Call("read_file", map[string]any{"file_path": path}) },
	edit: func(path, old, new string) agentcli.Turn {
		return agentcli.Call("replace", map[string]any{"file_path": path, "old_string": old, "new_string": new,
			"instruction": "Replace " + old + " with " + new + " in " + path + "."})
	},
	grep: func(pattern, path string) agentcli.Turn {
		return agentcli.Call("grep_search", map[string]any{"pattern": pattern, "dir_path": path})
	},
}

// The project every fix-and-test session works on: add() subtracts; the
// unit test fails with the same text until it adds; the linter fails with
// the same text until add has a doc comment; the flaky test fails its
// first run only.
const (
	addGo   = "package calc\n\n// v0\nfunc add(a, b int) int { return a - b }\n"
	unitSh  = "#!/bin/sh\nif grep -q 'a + b' add.go; then echo 'ok  calc 0.01s'; else echo '--- FAIL: TestAdd: add(2, 3) = -1, want 5'; echo 'FAIL calc'; exit 1; fi\n"
	lintSh  = "#!/bin/sh\nif grep -q '^// add ' add.go; then echo 'lint: clean'; else echo 'add.go:4:1: exported func add should have a comment starting with \"add \"'; exit 1; fi\n"
	flakySh = "#!/bin/sh\nn=$(cat .runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > .runs\nif [ $n -eq 1 ]; then echo '--- FAIL: TestStore: dial tcp 127.0.0.1:5432: connection refused'; exit 1; fi\necho 'ok  store 0.42s'\n"
)

// setupProject writes the project's files and makes the scripts runnable.
func setupProject(ts toolset) []agentcli.Turn {
	return []agentcli.Turn{
		ts.write("add.go", addGo),
		ts.write("unit.sh", unitSh),
		ts.write("lint.sh", lintSh),
		ts.write("flaky.sh", flakySh),
		ts.shell("chmod +x unit.sh lint.sh flaky.sh && ls"),
		ts.read("add.go"),
	}
}

// healthyScenario is one healthy session, written for a toolset.
type healthyScenario struct {
	name  string
	model func(ts toolset) agentcli.Model
}

const healthyDone = "All done."

var fixAndTest = []healthyScenario{
	{"the same failing test re-run once, then edit and test", func(ts toolset) agentcli.Model {
		turns := append(setupProject(ts),
			ts.shell("./unit.sh"),
			ts.shell("./unit.sh"),
			ts.edit("add.go", "a - b", "a + b"),
			ts.shell("./unit.sh"),
		)
		return agentcli.Script(healthyDone, turns...)
	}},
	{"edit and test five times with the same failure each time", func(ts toolset) agentcli.Model {
		turns := setupProject(ts)
		for i := 1; i <= 5; i++ {
			turns = append(turns,
				ts.edit("add.go", fmt.Sprintf("// v%d", i-1), fmt.Sprintf("// v%d", i)),
				ts.shell("./unit.sh"))
		}
		turns = append(turns, ts.edit("add.go", "a - b", "a + b"), ts.shell("./unit.sh"))
		return agentcli.Script(healthyDone, turns...)
	}},
	{"a re-run after a flaky pass", func(ts toolset) agentcli.Model {
		turns := append(setupProject(ts),
			ts.edit("add.go", "a - b", "a + b"),
			ts.shell("./flaky.sh"),
			ts.shell("./flaky.sh"),
			ts.shell("./flaky.sh"),
			ts.shell("./unit.sh"),
		)
		return agentcli.Script(healthyDone, turns...)
	}},
	{"two test commands alternating", func(ts toolset) agentcli.Model {
		turns := setupProject(ts)
		for i := 1; i <= 4; i++ {
			turns = append(turns,
				ts.edit("add.go", fmt.Sprintf("// v%d", i-1), fmt.Sprintf("// v%d", i)),
				ts.shell("./unit.sh"),
				ts.shell("./lint.sh"))
		}
		turns = append(turns,
			ts.edit("add.go", "// v4\nfunc add(a, b int) int { return a - b }", "// add returns a+b.\nfunc add(a, b int) int { return a + b }"),
			ts.shell("./unit.sh"),
			ts.shell("./lint.sh"))
		return agentcli.Script(healthyDone, turns...)
	}},
}

// ciSh prints a CI run's status as `gh run view --json status,conclusion`
// would: in_progress for its first pending polls, then success.
func ciSh(pending int) string {
	return fmt.Sprintf("#!/bin/sh\nn=$(cat .polls 2>/dev/null || echo 0); n=$((n+1)); echo $n > .polls\n"+
		"if [ $n -le %d ]; then echo '{\"status\":\"in_progress\",\"conclusion\":\"\"}'; else echo '{\"status\":\"completed\",\"conclusion\":\"success\"}'; fi\n", pending)
}

// ciPolling commits, then polls CI with a short sleep until it reports
// success (pending in_progress answers first), then merges.
func ciPolling(ts toolset, pending int) agentcli.Model {
	lead := []agentcli.Turn{
		ts.write("ci.sh", ciSh(pending)),
		ts.shell("chmod +x ci.sh && git init -q . && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm 'fix add' && echo pushed"),
	}
	poll := ts.shell("sleep 2 && ./ci.sh")
	return agentcli.ModelFunc(func(c agentcli.Conversation) agentcli.Turn {
		n := len(c.Results)
		if n < len(lead) {
			return lead[n]
		}
		switch last := c.Last().Content; {
		case strings.Contains(last, "merged"):
			return agentcli.Done(healthyDone)
		case strings.Contains(last, `"completed"`):
			return ts.shell("echo merged > STATUS && cat STATUS")
		}
		if n-len(lead) > 3*pending+3 {
			return agentcli.Done("gave up polling")
		}
		return poll
	})
}

// buildSh is a build that takes about 16 s and reports each step.
const buildSh = "#!/bin/sh\nfor i in $(seq 1 16); do echo \"build step $i/16\"; sleep 1; done; echo 'BUILD DONE'\n"

// claudeBackgroundJob starts the build with Claude Code's background Bash
// and polls the output file the CLI names in its answer (2.1.332 has no
// output tool of its own: "use Read on that file path"), each poll a short
// wait and the file's last lines, until the build is done.
func claudeBackgroundJob() agentcli.Model {
	lead := []agentcli.Turn{
		claudeTools.write("build.sh", buildSh),
		agentcli.Bash("chmod +x build.sh"),
		{Tool: &agentcli.ToolUse{Name: "Bash", Input: map[string]any{"command": "./build.sh", "description": "Build the project", "run_in_background": true}}},
	}
	outputFile := regexp.MustCompile(`/\S+\.output`)
	return agentcli.ModelFunc(func(c agentcli.Conversation) agentcli.Turn {
		n := len(c.Results)
		if n < len(lead) {
			return lead[n]
		}
		// The CLI appends a blank line and "[exited with code 0]" to the
		// file when the job ends.
		if last := c.Last().Content; strings.Contains(last, "BUILD DONE") || strings.Contains(last, "[exited with code 0]") {
			return agentcli.Done(healthyDone)
		}
		if n-len(lead) > 30 {
			return agentcli.Done("gave up polling")
		}
		out := outputFile.FindString(c.Results[len(lead)-1].Content)
		if out == "" {
			return agentcli.Done("no output file in the background call's result")
		}
		return agentcli.Bash("sleep 2 && tail -n 2 " + out)
	})
}

// checkHealthy fails t unless the run ended by itself after its whole
// script with no call blocked and no kill decided, and logs what the
// collector and the hook did say.
func checkHealthy(t *testing.T, r agentRun) {
	t.Helper()
	if r.exit != 0 || r.killed() {
		t.Fatalf("want the healthy agent to finish by itself (exit 0), got %s", r)
	}
	if n := r.blocked(); n != 0 {
		t.Errorf("the hook blocked %d calls of a healthy session, want 0\n%s", n, r)
	}
	if n := r.stuckKills(); n != 0 {
		t.Errorf("the collector decided %d kills on a healthy session\n%s", n, r)
	}
	ex := r.model.Exchanges()
	calls := 0
	for _, e := range ex {
		if e.Turn.Tool != nil {
			calls++
		}
	}
	if len(ex) == 0 || ex[len(ex)-1].Turn.Tool != nil || ex[len(ex)-1].Turn.Text != healthyDone {
		t.Errorf("the session did not finish its script (%d calls)\n%s", calls, r)
	}
	var verdicts []string
	for _, tr := range r.transitions(t, nil) {
		verdicts = append(verdicts, fmt.Sprintf("%s->%s %s at call %d", tr.From, tr.To, tr.Reason, tr.CallIndex))
	}
	t.Logf("%d calls, %d blocked, %d kills decided; verdicts %v; nudged after result %d (0: never)", calls, r.blocked(), r.stuckKills(), verdicts, r.heardAt())
}

// ciPending is how many times the CI run is still in progress: 7
// identical polls, more than the 5 the kill rule counts; only the poll's
// result shows the engine that they wait (Claude Code's traces beta with
// tool content, which loopsupervisor sets for the README's recipe; Gemini
// CLI's tool spans, read without the process group its shell names each
// call).
const ciPending = 6

func TestClaudeCodeHealthySessionsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	for _, sc := range fixAndTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runClaude(t, sc.model(claudeTools), httpHook))
		})
	}
	t.Run("CI polled with a short sleep until it completes", func(t *testing.T) {
		t.Parallel()
		checkHealthy(t, runClaudeTelemetry(t, ciPolling(claudeTools, ciPending), httpHook, true))
	})
	t.Run("a background job polled until done", func(t *testing.T) {
		t.Parallel()
		checkHealthy(t, runClaudeTelemetry(t, claudeBackgroundJob(), httpHook, true))
	})
}

func TestGeminiCLIHealthySessionsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	for _, sc := range fixAndTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runGemini(t, sc.model(geminiTools), true))
		})
	}
	t.Run("CI polled with a short sleep until it completes", func(t *testing.T) {
		t.Parallel()
		checkHealthy(t, runGemini(t, ciPolling(geminiTools, ciPending), true))
	})
}

// codingSession is 40 calls of ordinary coding work: reading around,
// editing, running the tests after every edit (the same command, a
// different outcome each time as the code changes), a failing then passing
// build, grepping.
func codingSession(ts toolset) agentcli.Model {
	turns := []agentcli.Turn{
		ts.shell("mkdir -p src && printf 'package main\\n\\nfunc add(a, b int) int { return a - b }\\n' > src/add.go"),
		ts.shell("printf '#!/bin/sh\\ngrep -q \"a + b\" src/add.go && echo PASS || { echo FAIL: add; exit 1; }\\n' > test.sh && chmod +x test.sh"),
		ts.shell("ls -la"),
		ts.shell("./test.sh"),
		ts.read("src/add.go"),
		ts.grep("func ", "src"),
	}
	for i := range 8 {
		f := fmt.Sprintf("src/f%d.go", i)
		turns = append(turns,
			ts.write(f, fmt.Sprintf("package main\n\nfunc f%d() int { return %d }\n", i, i)),
			ts.shell("./test.sh"),
			ts.shell(fmt.Sprintf("wc -l %s", f)),
		)
	}
	turns = append(turns,
		ts.edit("src/add.go", "a - b", "a + b"),
		ts.shell("./test.sh"),
		ts.shell("git init -q . && git add -A && git commit -qm 'fix add' -c user.name=t -c user.email=t@example.com || true"),
		ts.shell("ls src | wc -l"),
		ts.grep("return", "src"),
		ts.shell("cat src/add.go"),
		ts.shell("./test.sh"),
		ts.shell("for i in 1 2 3; do echo page $i; done"),
		ts.read("test.sh"),
		ts.shell("echo done > STATUS"),
	)
	return agentcli.Script(healthyDone, turns...)
}

// checkCodingSession is checkHealthy, and more: the 40 calls were made and
// the collector never found the session stuck, so no nudge either.
func checkCodingSession(t *testing.T, r agentRun) {
	t.Helper()
	checkHealthy(t, r)
	calls := 0
	for _, e := range r.model.Exchanges() {
		if e.Turn.Tool != nil {
			calls++
		}
	}
	if calls != 40 {
		t.Errorf("the session made %d tool calls, want 40", calls)
	}
	if strings.Contains(r.supLog, "verified warn") || strings.Contains(r.collector.LogText(), "Agent session stuck") {
		t.Errorf("the collector found a healthy session stuck\n%s", r)
	}
}

func TestClaudeCodeCodingSessionIsNeverBlocked(t *testing.T) {
	t.Parallel()
	checkCodingSession(t, runClaude(t, codingSession(claudeTools), commandHook))
}

func TestGeminiCLICodingSessionIsNeverBlocked(t *testing.T) {
	t.Parallel()
	checkCodingSession(t, runGemini(t, codingSession(geminiTools), true))
}

// surveys are the main agent's delegations in the side-by-side subagent
// tests: five subagents, each to survey one part of the repository.
func surveys(delegate func(what string) agentcli.Turn) []agentcli.Turn {
	return []agentcli.Turn{delegate("tests"), delegate("docs"), delegate("build files"), delegate("licences"), delegate("scripts")}
}

// surveyCalls are each such subagent's first reads, the same in all five:
// five agents making them are not one agent repeating them.
func surveyCalls(shell func(command string) agentcli.Turn) []agentcli.Turn {
	return []agentcli.Turn{shell("ls -la"), shell("cat README.md 2>/dev/null || echo no readme"), shell("git status 2>&1 | head -3")}
}
