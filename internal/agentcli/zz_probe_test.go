package agentcli

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestProbeBackground(t *testing.T) {
	bin := os.Getenv("CLAUDE_CODE_BIN")
	dir := t.TempDir()
	var log strings.Builder
	m := ModelFunc(func(c Conversation) Turn {
		n := len(c.Results)
		fmt.Fprintf(&log, "--- %d results; last: %q ctx %q\n", n, c.Last().Content, c.Last().Context)
		switch {
		case n == 0:
			return Turn{Tool: &ToolUse{Name: "Bash", Input: map[string]any{"command": "for i in 1 2 3 4 5 6; do echo step $i; sleep 1; done; echo BUILD DONE", "description": "build", "run_in_background": true}}}
		case n == 1:
			return Bash("sleep 2 && echo polled")
		case n < 9:
			if strings.Contains(c.Last().Content, "BUILD DONE") {
				return Done("built")
			}
			m := regexp.MustCompile(`/[^\s]*\.output`).FindString(c.Results[0].Content)
			return Call("Read", map[string]any{"file_path": m})
		}
		return Done("gave up")
	})
	s := Start(t, m)
	p := NewClaudeProject(t, dir, "")
	cmd := exec.Command(ClaudeArgs(bin, "hi")[0], ClaudeArgs(bin, "hi")[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env(s, "")
	out, err := cmd.CombinedOutput()
	os.WriteFile("/tmp/exp/bg-out.txt", out, 0o644)
	os.WriteFile("/tmp/exp/bg-log.txt", []byte(log.String()), 0o644)
	t.Log(err)
}
