package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// Gemini CLI sessions: the corpus's scripts played by the real Gemini CLI
// ($GEMINI_CLI_BIN) on a scripted Gemini API, its session files kept as
// the CLI wrote them (~/.gemini/tmp/<project>/chats/session-*.jsonl).

// recordGeminiEnv, set to a regular expression of session names, re-records
// those Gemini CLI sessions into geminiDir; then run TestGeminiSessions
// with -update to write their transitions.
const recordGeminiEnv = "LOOPREPLAY_RECORD_GEMINI"

const geminiDir = "testdata/gemini-cli"

// geminiSessions are the recorded Gemini CLI sessions.
var geminiSessions = []corpusSession{
	{name: "healthy-fix-and-page", script: func(dir string) *script {
		w := newWork(dir, 31)
		w.explore(4).fixPackage("cart", true).page(4, 25).grepSweep(4)
		w.bash("go test ./...").git("fix cart")
		return w.s
	}},
	{name: "loop-identical-call", loop: true, script: func(dir string) *script {
		return loopAfter(dir, 32, func(w *work) {
			repeat(20, func(int) { w.bash("cat data/issues.txt | awk '{print $1}' | sort -n") })
		})
	}},
	{name: "loop-search-read-oscillation", loop: true, script: func(dir string) *script {
		return loopAfter(dir, 33, func(w *work) {
			repeat(12, func(int) { w.grep("TODO", "cart").read("cart/cart.go") })
		})
	}},
}

// geminiTurn is a corpus turn in Gemini CLI's tools: the scripts are
// written with Claude Code's tool names and inputs.
func geminiTurn(t agentcli.Turn) agentcli.Turn {
	if t.Tool == nil {
		return t
	}
	in := t.Tool.Input
	switch t.Tool.Name {
	case "Bash":
		return agentcli.Shell(in["command"].(string))
	case "Read":
		out := map[string]any{"file_path": in["file_path"]}
		if off, ok := in["offset"].(int); ok {
			out["start_line"] = off
			out["end_line"] = off + in["limit"].(int) - 1
		}
		return agentcli.Call("read_file", out)
	case "Grep":
		out := map[string]any{"pattern": in["pattern"]}
		if p, ok := in["path"]; ok {
			out["dir_path"] = p
		}
		return agentcli.Call("grep_search", out)
	case "Glob":
		return agentcli.Call("glob", map[string]any{"pattern": in["pattern"]})
	case "Edit":
		return agentcli.Call("replace", map[string]any{
			"file_path": in["file_path"], "old_string": in["old_string"], "new_string": in["new_string"],
			"instruction": "fix the bug the failing test shows",
		})
	case "Write":
		return agentcli.Call("write_file", map[string]any{"file_path": in["file_path"], "content": in["content"]})
	}
	return t
}

// inGemini rewrites every step of s to Gemini CLI's tools.
func inGemini(s *script) *script {
	for i := range s.steps {
		s.steps[i].turn = geminiTurn(s.steps[i].turn)
	}
	return s
}

func TestRecordGeminiSessions(t *testing.T) {
	pattern := os.Getenv(recordGeminiEnv)
	if pattern == "" {
		t.Skip("set " + recordGeminiEnv + " to re-record the Gemini CLI sessions with the real CLI")
	}
	match := regexp.MustCompile(pattern)
	bin := agentcli.GeminiBin(t)
	root := filepath.Join(os.TempDir(), "loopreplay-gemini")
	cache := filepath.Join(root, "gocache")
	warmGoCache(t, root, cache)
	for _, s := range geminiSessions {
		if match.MatchString(s.name) {
			t.Run(s.name, func(t *testing.T) { recordGemini(t, bin, root, cache, s) })
		}
	}
}

func recordGemini(t *testing.T, bin, root, cache string, s corpusSession) {
	dir := filepath.Join(root, s.name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	p := agentcli.NewGeminiProject(t, dir, "")
	writeShopRepo(t, p.Dir)
	srv := agentcli.StartGemini(t, inGemini(s.script(p.Dir)))
	args := agentcli.GeminiArgs(bin, corpusPrompt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = append(p.Env(srv, ""), goEnv(root, cache)...)
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		t.Fatalf("gemini: %v\n%s", err, stderr.String())
	}
	files, err := filepath.Glob(filepath.Join(p.Home, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want one session file, got %v (%v)\n%s", files, err, stderr.String())
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(geminiDir, s.name)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(out, filepath.Base(files[0])), b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d model turns, %s", s.name, len(srv.Exchanges()), fmt.Sprint(strings.Count(string(b), "\n"), " lines"))
}
