//go:build unix

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// TestReadmeStepsKillWithDefaults follows the README's "Watch your own
// agent" steps: the collector runs config/local.yaml with only the webhook
// secret set, the supervisor runs with its defaults (no --listen) around an
// agent that finds the collector through OTEL_EXPORTER_OTLP_ENDPOINT, and
// the agent's loop ends in a delivered, verified kill.
//
// What is overridden, and why: config/local.yaml listens on fixed loopback
// ports (OTLP 4317/4318, health 13133, metrics 8888) and the supervisor on
// 127.0.0.1:8787. Each default that is taken on this machine when the test
// starts (another collector, a parallel test) is replaced by a free port
// through the config's own environment variable (LOOP_OTLP_GRPC_PORT,
// LOOP_OTLP_HTTP_PORT, LOOP_HEALTH_PORT, LOOP_METRICS_PORT; for the
// supervisor, --listen on one side and LOOPSUPERVISOR_PORT on the other).
// Defaults that are free are used as they are, and the test logs which were
// replaced. The trace file goes to the test's directory (LOOP_TRACES_FILE)
// instead of the working directory. TestSupervisorDefaultMatchesLocalConfig
// checks the address agreement itself, whatever was free.
func TestReadmeStepsKillWithDefaults(t *testing.T) {
	t.Parallel()
	bin, supBin, agentBin := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secret := testproc.NewSecret(t)

	ports := map[string]int{"LOOP_OTLP_GRPC_PORT": 4317, "LOOP_OTLP_HTTP_PORT": 4318, "LOOP_HEALTH_PORT": 13133, "LOOP_METRICS_PORT": 8888}
	env := []string{"LOOPDETECT_WEBHOOK_SECRET=" + secret, "LOOP_TRACES_FILE=" + filepath.Join(dir, "traces.jsonl")}
	for _, name := range []string{"LOOP_OTLP_GRPC_PORT", "LOOP_OTLP_HTTP_PORT", "LOOP_HEALTH_PORT", "LOOP_METRICS_PORT"} {
		if !portFree(ports[name]) {
			p := testproc.FreePort(t)
			t.Logf("127.0.0.1:%d is taken here: %s=%d", ports[name], name, p)
			ports[name] = p
			env = append(env, fmt.Sprintf("%s=%d", name, p))
		}
	}
	supArgs := []string{}
	if !portFree(8787) {
		p := testproc.FreePort(t)
		t.Logf("127.0.0.1:8787 is taken here: supervisor --listen 127.0.0.1:%d, LOOPSUPERVISOR_PORT=%d", p, p)
		supArgs = append(supArgs, "--listen", "127.0.0.1:"+strconv.Itoa(p))
		env = append(env, "LOOPSUPERVISOR_PORT="+strconv.Itoa(p))
	}

	// Step 2: the collector.
	col := testproc.Start(t, dir, "collector", env, "", bin, "--config", filepath.Join(root, "config", "local.yaml"))
	col.LogTail = 8000
	col.WaitHealthy(t, ports["LOOP_HEALTH_PORT"], 30*time.Second)

	// Step 3: the agent under the supervisor, its SDK pointed at the collector.
	secretsFile := filepath.Join(dir, "loopsupervisor.secrets")
	if err := os.WriteFile(secretsFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	supArgs = append(supArgs, "--secrets-file", secretsFile)
	agentEnv := []string{
		fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", ports["LOOP_OTLP_HTTP_PORT"]),
	}
	result := filepath.Join(dir, "supervisor.stdout")
	argv := append(append([]string{supBin}, supArgs...), "--", agentBin, "--scenario", "seed000", "--speed", strconv.Itoa(seed000Speed))
	sup := testproc.Start(t, dir, "supervisor", agentEnv, result, argv...)
	t.Cleanup(func() {
		if pid := agentPID(sup.LogText()); pid > 1 && syscall.Kill(-pid, 0) == nil {
			t.Logf("agent group %d outlived its supervisor: SIGKILL", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})

	if code := sup.Wait(t, 60*time.Second); code != 86 {
		t.Fatalf("supervisor exit code %d, want 86 (stopped on a verified loop kill)\nsupervisor+agent log:\n%s\ncollector log:\n%s",
			code, sup.LogText(), testproc.Tail(col.LogText(), 8000))
	}
	log := sup.LogText()
	if n := strings.Count(log, "loopsupervisor: verified kill "); n != 1 {
		t.Errorf("supervisor logged %d verified kills, want 1:\n%s", n, log)
	}
	// The result line goes to stdout by default, after the agent's own
	// (absent: it was killed).
	out := strings.TrimSpace(readFile(t, result))
	if !strings.Contains(out, `"status":"error"`) || !strings.Contains(out, `"kind":"loop_kill"`) || !strings.Contains(out, `"reason":"frequent_identical"`) {
		t.Errorf("result line on stdout: %q, want status error, kind loop_kill, reason frequent_identical", out)
	}
	// Nothing was left undelivered on the way.
	if strings.Contains(col.LogText(), "connection_error") {
		t.Errorf("the collector failed to reach the supervisor:\n%s", testproc.Tail(col.LogText(), 4000))
	}
}

// TestSupervisorDefaultMatchesLocalConfig: where config/local.yaml and
// config/demo.yaml send kills when no variable is set is where the
// supervisor listens when no flag is given.
func TestSupervisorDefaultMatchesLocalConfig(t *testing.T) {
	t.Parallel()
	_, supBin, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(supBin, "-h").CombinedOutput()
	m := regexp.MustCompile(`(?m)^\s*-listen string\n.*\(default "([^"]+)"\)`).FindSubmatch(help)
	if m == nil {
		t.Fatalf("no --listen default in loopsupervisor -h:\n%s", help)
	}
	listen := string(m[1])
	for _, name := range []string{"local.yaml", "demo.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "config", name))
		if err != nil {
			t.Fatal(err)
		}
		em := regexp.MustCompile(`(?s)alert_sink:.*?kill:\s*\n\s*endpoint:\s*(\S+)`).FindSubmatch(b)
		if em == nil {
			t.Fatalf("config/%s: no alert_sink kill endpoint", name)
		}
		// ${env:NAME:-default} as the collector resolves it with NAME unset.
		endpoint := regexp.MustCompile(`\$\{env:[A-Z0-9_]+:-([^}]*)\}`).ReplaceAllString(string(em[1]), "$1")
		want := "http://" + listen + "/kill"
		if endpoint != want {
			t.Errorf("config/%s sends kills to %s by default; the supervisor listens on %s (want %s)", name, endpoint, listen, want)
		}
	}
}

// portFree reports whether nothing listens on 127.0.0.1:port now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
