//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// TestTwoAgentsEachKilledByItsOwnSupervisor runs one collector on
// config/local.yaml with config/overlays/second-agent.yaml and two looping
// agents, each under its own supervisor on its own port: each agent is
// stopped by its own supervisor, and each supervisor turns the other's kill
// away.
func TestTwoAgentsEachKilledByItsOwnSupervisor(t *testing.T) {
	t.Parallel()
	_, supBin, agentBin := binaries(t)
	dir := t.TempDir()
	ports := []int{testproc.FreePort(t), testproc.FreePort(t)}
	col, otlp, secrets := startOverlayCollector(t, dir, ports[0], ports[1])
	sups := make([]*testproc.Proc, 2)
	results := make([]string, 2)
	for i, port := range ports {
		results[i] = filepath.Join(dir, fmt.Sprintf("result%d", i))
		sups[i] = testproc.Start(t, dir, fmt.Sprintf("supervisor%d", i),
			[]string{fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", otlp)}, results[i],
			supBin, "--listen", "127.0.0.1:"+strconv.Itoa(port), "--secrets-file", secrets, "--",
			agentBin, "--scenario", "seed000", "--speed", strconv.Itoa(seed000Speed))
	}
	for i, sup := range sups {
		if code := sup.Wait(t, 60*time.Second); code != 86 {
			t.Fatalf("supervisor %d: exit %d, want 86\n%s\ncollector:\n%s", i, code, sup.LogText(), testproc.Tail(col.LogText(), 4000))
		}
		var r struct{ Session, LoopSession string }
		out := strings.Split(strings.TrimSpace(readFile(t, results[i])), "\n")
		if err := json.Unmarshal([]byte(out[len(out)-1]), &r); err != nil {
			t.Fatalf("supervisor %d result line: %v", i, err)
		}
		log := sup.LogText()
		if n := strings.Count(log, "verified kill "); n != 1 {
			t.Errorf("supervisor %d logged %d verified kills, want its own one:\n%s", i, n, log)
		}
		if !strings.Contains(log, "session "+r.Session) {
			t.Errorf("supervisor %d killed for session %s, not the one it gave its agent:\n%s", i, r.Session, log)
		}
	}
}

// TestSquatterOnAFreeSupervisorPortLearnsNothing: with the second agent not
// running, a stranger binds its supervisor's port. The first agent loops and
// is killed by its own supervisor, and the squatter receives nothing at all
// (kill.only_named_agents), so it learns no instance id to forge spans with.
func TestSquatterOnAFreeSupervisorPortLearnsNothing(t *testing.T) {
	t.Parallel()
	_, supBin, agentBin := binaries(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var received []string
	squatter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, string(b))
		mu.Unlock()
	}))
	t.Cleanup(squatter.Close)
	squatPort := squatter.Listener.Addr().(*net.TCPAddr).Port
	ownPort := testproc.FreePort(t)
	col, otlp, secrets := startOverlayCollector(t, dir, ownPort, squatPort)
	result := filepath.Join(dir, "result")
	sup := testproc.Start(t, dir, "supervisor",
		[]string{fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", otlp)}, result,
		supBin, "--listen", "127.0.0.1:"+strconv.Itoa(ownPort), "--secrets-file", secrets, "--",
		agentBin, "--scenario", "seed000", "--speed", strconv.Itoa(seed000Speed))
	if code := sup.Wait(t, 60*time.Second); code != 86 {
		t.Fatalf("supervisor: exit %d, want 86\n%s\ncollector:\n%s", code, sup.LogText(), testproc.Tail(col.LogText(), 4000))
	}
	var r struct{ Session string }
	out := strings.Split(strings.TrimSpace(readFile(t, result)), "\n")
	if err := json.Unmarshal([]byte(out[len(out)-1]), &r); err != nil || r.Session == "" {
		t.Fatalf("result line %q: %v", out, err)
	}
	// The collector delivers the last notices within its retry window;
	// give a misrouted one the time to arrive before looking.
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(received) > 0 {
		t.Errorf("the squatter received %d requests, want none:\n%s", len(received), strings.Join(received, "\n"))
	}
	for _, b := range received {
		if strings.Contains(b, r.Session) {
			t.Errorf("the squatter learnt the agent's instance id")
		}
	}
}

// startOverlayCollector runs the collector on config/local.yaml with
// config/overlays/second-agent.yaml, kills going to the two supervisor
// ports, and writes the kill secret into a 0600 secrets file for the
// supervisors. It returns the collector, its OTLP/HTTP port and the file.
func startOverlayCollector(t *testing.T, dir string, port1, port2 int) (col *testproc.Proc, otlp int, secrets string) {
	t.Helper()
	bin, _, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	secret := testproc.NewSecret(t)
	otlp, health := testproc.FreePort(t), testproc.FreePort(t)
	env := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + secret,
		"LOOPSUPERVISOR_PORT=" + strconv.Itoa(port1),
		"LOOPSUPERVISOR_PORT_2=" + strconv.Itoa(port2),
		"LOOP_OTLP_HTTP_PORT=" + strconv.Itoa(otlp),
		"LOOP_OTLP_GRPC_PORT=" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_HEALTH_PORT=" + strconv.Itoa(health),
		"LOOP_METRICS_PORT=" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_TRACES_FILE=" + filepath.Join(dir, "traces.jsonl"),
	}
	col = testproc.Start(t, dir, "collector", env, "", bin, "--config", filepath.Join(root, "config", "local.yaml"),
		"--config", filepath.Join(root, "config", "overlays", "second-agent.yaml"))
	col.LogTail = 6000
	col.WaitHealthy(t, health, 30*time.Second)
	secrets = filepath.Join(dir, "loopsupervisor.secrets")
	if err := os.WriteFile(secrets, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return col, otlp, secrets
}
