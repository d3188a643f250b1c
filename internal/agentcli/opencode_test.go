package agentcli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenCodeRunsTheScriptedModel runs the real OpenCode CLI on the
// scripted Chat Completions API: it must run the model's bash call and send
// the call's output back, then end on the model's final text.
func TestOpenCodeRunsTheScriptedModel(t *testing.T) {
	bin := OpenCodeBin(t)
	srv := StartOpenCode(t, Script("finished", OpenCodeBash("echo hello-from-bash > out.txt; cat out.txt")))
	p := NewOpenCodeProject(t, t.TempDir(), srv)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	argv := OpenCodeArgs(bin, "Say hello.")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = p.Dir, p.Env("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("opencode run: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(p.Dir, "out.txt")); err != nil || strings.TrimSpace(string(b)) != "hello-from-bash" {
		t.Fatalf("the bash call did not run (out.txt %q, %v)\n%s", b, err, out)
	}
	ex := srv.Exchanges()
	if len(ex) != 2 || ex[1].Turn.Tool != nil {
		t.Fatalf("want 2 exchanges (the call, then the final text), got %d\n%s", len(ex), out)
	}
	if got := ex[1].Conversation.Last().Content; !strings.Contains(got, "hello-from-bash") {
		t.Errorf("the model was sent %q as the call's result, want the command's output\n%s", got, out)
	}
	t.Logf("%s", out)
}
