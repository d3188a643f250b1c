package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each call of a Codex CLI rollout is replayed as the codex.tool_result
// record the live CLI exports: a function call's arguments as their JSON,
// apply_patch's free-text patch as it is, the output the model read.
func TestCodexRecordIsTheLiveRecord(t *testing.T) {
	files, err := filepath.Glob("../../cmd/loopreplay/testdata/codex-cli/fix-and-test-with-apply-patch/rollout-*.jsonl")
	if err != nil || len(files) != 1 {
		t.Fatalf("the recorded session: %v %v", files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	calls, err := readCodex(data, files[0])
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		call, tool, argsPrefix, outputPrefix string
	}{
		{"call_toolu_0000", "apply_patch", "*** Begin Patch\n*** Add File: add.go\n", "Exit code: 0\n"},
		{"call_toolu_0004", "exec_command", `{"cmd":"chmod +x unit.sh lint.sh flaky.sh \u0026\u0026 ls"}`, "Chunk ID: "},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			var c *TranscriptCall
			for i := range calls {
				if calls[i].ID == tt.call {
					c = &calls[i]
				}
			}
			if c == nil {
				t.Fatalf("no call %s in %d calls", tt.call, len(calls))
			}
			lr := codexRecord(c).ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
			get := func(k string) string { v, _ := lr.Attributes().Get(k); return v.Str() }
			if get("event.name") != "codex.tool_result" || get("tool_name") != tt.tool || get("conversation.id") != c.Session {
				t.Errorf("record %v", lr.Attributes().AsRaw())
			}
			if !strings.HasPrefix(get("arguments"), tt.argsPrefix) {
				t.Errorf("arguments %q, want them to start %q", get("arguments"), tt.argsPrefix)
			}
			if !strings.HasPrefix(get("output"), tt.outputPrefix) {
				t.Errorf("output %q, want it to start %q", get("output"), tt.outputPrefix)
			}
		})
	}
}
