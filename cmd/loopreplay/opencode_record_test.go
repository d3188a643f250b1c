package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// OpenCode sessions: OpenCode 1.18.33 keeps its sessions in an SQLite
// database (opencode.db under its XDG data directory), which loopreplay
// does not read; `opencode export <session>` prints one as JSON, which it
// does. The recorded sessions are runs of internal/e2e's OpenCode tests
// kept with LOOP_E2E_KEEP=1, exported as the CLI prints them.

// recordOpenCodeEnv names the runs to record: case=run-dir pairs,
// comma-separated, each run-dir one that LOOP_E2E_KEEP=1 kept. Each case
// gets the run's exported sessions and its live ai.toolCall spans; then
// compare TestOpenCodeSessions' figures with what the e2e test logged.
const recordOpenCodeEnv = "LOOPREPLAY_RECORD_OPENCODE"

const openCodeDir = "testdata/opencode"

// openCodeLiveFile holds, beside a case's exported session, the
// ai.toolCall spans OpenCode sent the collector in the same run.
const openCodeLiveFile = "live-tool-calls.otlp.jsonl"

func TestRecordOpenCodeSessions(t *testing.T) {
	runs := os.Getenv(recordOpenCodeEnv)
	if runs == "" {
		t.Skip("set " + recordOpenCodeEnv + " to record OpenCode sessions from kept end-to-end runs")
	}
	bin := agentcli.OpenCodeBin(t)
	for _, run := range strings.Split(runs, ",") {
		name, dir, ok := strings.Cut(run, "=")
		if !ok {
			t.Fatalf("%s: want case=run-dir, got %q", recordOpenCodeEnv, run)
		}
		t.Run(name, func(t *testing.T) { recordOpenCode(t, bin, name, dir) })
	}
}

func recordOpenCode(t *testing.T, bin, name, dir string) {
	p := agentcli.OpenCodeProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	out := filepath.Join(openCodeDir, name)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(openCode(t, bin, p, "session", "list", "--format", "json"), &list); err != nil || len(list) == 0 {
		t.Fatalf("the run's sessions: %v %v", list, err)
	}
	for _, s := range list {
		b := openCode(t, bin, p, "export", s.ID)
		if err := writeFile(filepath.Join(out, s.ID+".json"), b); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: session %s, %d bytes", name, s.ID, len(b))
	}
	live, n := liveToolCalls(t, filepath.Join(dir, "traces.jsonl"))
	if err := writeFile(filepath.Join(out, openCodeLiveFile), live); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d live ai.toolCall spans", name, n)
}

// openCode runs the CLI on the run's own HOME and XDG directories and
// returns what it printed on stdout (export says what it does on stderr).
func openCode(t *testing.T, bin string, p agentcli.OpenCodeProject, args ...string) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env("")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("opencode %v: %v\n%s", args, err, stderr.String())
	}
	return b
}

// liveToolCalls keeps, of the collector's output file, the ai.toolCall
// spans as OpenCode sent them: the transitions loop_detect added to them
// are taken off, and the other 270 or so spans a call makes are left out.
func liveToolCalls(t *testing.T, traces string) ([]byte, int) {
	f, err := os.Open(traces)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	var u ptrace.JSONUnmarshaler
	var m ptrace.JSONMarshaler
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		td, err := u.UnmarshalTraces(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		n += keepToolCalls(td)
		if td.SpanCount() == 0 {
			continue
		}
		b, err := m.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), n
}

// keepToolCalls removes every span of td but the ai.toolCall spans, and
// their loop_detect events and attributes; it returns how many are left.
func keepToolCalls(td ptrace.Traces) int {
	n := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				if sp.Name() != "ai.toolCall" {
					return true
				}
				sp.Events().RemoveIf(func(e ptrace.SpanEvent) bool { return strings.HasPrefix(e.Name(), "loopdetect.") })
				sp.Attributes().RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, "loopdetect.") })
				n++
				return false
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	return n
}
