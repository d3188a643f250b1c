package alertsink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/extension"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// Environment of the persistence child process.
const (
	envChild    = "ALERTSINK_PERSIST_CHILD" // "enqueue" or "deliver"
	envDir      = "ALERTSINK_PERSIST_DIR"
	envEndpoint = "ALERTSINK_PERSIST_ENDPOINT"
	envBase     = "ALERTSINK_PERSIST_BASE" // unix milliseconds all decided_at derive from
)

const (
	persistLive    = 90 // kills with a 60 s ttl
	persistExpired = 10 // kills that expire while the endpoint is down
	shortExpiry    = 1500 * time.Millisecond
)

type persistHost struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h persistHost) GetExtensions() map[component.ID]component.Component { return h.exts }

// init lets the test binary double as the persistence child (the generated
// TestMain belongs to goleak).
func init() {
	if phase := os.Getenv(envChild); phase != "" {
		os.Exit(persistChild(phase))
	}
}

// persistChild runs the exporter with a file_storage queue. "enqueue" queues
// the kills (the endpoint is down), prints READY and waits to be killed;
// "deliver" starts on the same storage and waits to be stopped.
func persistChild(phase string) int {
	ctx := context.Background()
	dir := os.Getenv(envDir)
	storageID := component.MustNewIDWithName("file_storage", "q")
	sf := filestorage.NewFactory()
	scfg := sf.CreateDefaultConfig().(*filestorage.Config)
	scfg.Directory = dir
	scfg.Compaction.Directory = dir
	ext, err := sf.Create(ctx, extension.Settings{ID: storageID, TelemetrySettings: componenttest.NewNopTelemetrySettings()}, scfg)
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	host := persistHost{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{storageID: ext}}
	if err = ext.Start(ctx, host); err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	cfg := testConfig(os.Getenv(envEndpoint))
	q := exporterhelper.NewDefaultQueueConfig()
	q.StorageID = &storageID
	q.NumConsumers = 4
	cfg.QueueConfig = configoptional.Some(q)
	cfg.RetryConfig.MaxElapsedTime = 0 // retry until expiry drops the kill
	cfg.RetryConfig.MaxInterval = 100 * time.Millisecond
	cfg.TimeoutConfig.Timeout = time.Second
	set := nopSettings()
	set.ID = component.MustNewIDWithName("alert_sink", "persist")
	exp, err := NewFactory().CreateTraces(ctx, set, cfg)
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	if err = exp.Start(ctx, host); err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	if phase == "enqueue" {
		base, _ := strconv.ParseInt(os.Getenv(envBase), 10, 64)
		now := time.UnixMilli(base)
		for i := range persistLive + persistExpired {
			decided := now
			if i >= persistLive {
				// Valid for shortExpiry only: queued, then expired.
				decided = now.Add(-cfg.Kill.TTL + shortExpiry)
			}
			if err := exp.ConsumeTraces(ctx, tracesWith(killEvent(persistID(i), decided))); err != nil {
				fmt.Println("ERR", err)
				return 2
			}
		}
	}
	fmt.Println("READY")
	// Wait for SIGKILL (enqueue) or for stdin to close (deliver).
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = exp.Shutdown(ctx)
	_ = ext.Shutdown(ctx)
	return 0
}

func persistID(i int) string { return "ld_persist_" + strconv.Itoa(i) }

// startChild starts the test binary as the persistence child and waits for
// its READY line.
func startChild(t *testing.T, phase, dir, endpoint string, base int64) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+phase, envDir+"="+dir, envEndpoint+"="+endpoint, envBase+"="+strconv.FormatInt(base, 10))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		// Stop what we started, by its PID, if still running.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "READY\n", line, "child phase %s", phase)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return cmd, stdin
}

func TestPersistentQueueSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	base := time.Now().UnixMilli()

	// Phase 1: endpoint down, 100 kills queued on file_storage, SIGKILL.
	child, _ := startChild(t, "enqueue", dir, closedURL(t), base)
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	require.NotEmpty(t, mustGlob(t, filepath.Join(dir, "*")), "file_storage wrote nothing")

	// The short-lived kills must have expired before delivery can start.
	if d := time.Until(time.UnixMilli(base).Add(shortExpiry)); d > 0 {
		time.Sleep(d + 10*time.Millisecond) // waiting on the wall clock itself
	}

	// Phase 2: endpoint up, restart on the same storage.
	key, err := stdwebhook.ParseSecret(testSecret)
	require.NoError(t, err)
	var mu sync.Mutex
	got := map[string]int{}
	bad := []string{}
	all := make(chan struct{})
	closed := false
	srvURL := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &b)
		ts, _ := strconv.ParseInt(r.Header.Get(stdwebhook.HeaderTimestamp), 10, 64)
		want := stdwebhook.Sign([][]byte{key}, r.Header.Get(stdwebhook.HeaderID), ts, body)
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get(stdwebhook.HeaderSignature) != want || r.Header.Get(stdwebhook.HeaderID) != b.ID+".kill" || b.Type != "loop.kill" {
			bad = append(bad, r.Header.Get(stdwebhook.HeaderID))
		}
		got[b.ID]++
		live := 0
		for i := range persistLive {
			if got[persistID(i)] > 0 {
				live++
			}
		}
		if live == persistLive && !closed {
			closed = true
			close(all)
		}
		w.WriteHeader(200)
	}))
	_, stdin := startChild(t, "deliver", dir, srvURL+"/kill", base)
	select {
	case <-all:
	case <-time.After(20 * time.Second):
	}
	require.NoError(t, stdin.Close())

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad, "requests with a wrong id or signature")
	var missing []string
	for i := range persistLive {
		if got[persistID(i)] == 0 {
			missing = append(missing, persistID(i))
		}
	}
	require.Empty(t, missing, "unexpired kills lost across SIGKILL")
	for i := persistLive; i < persistLive+persistExpired; i++ {
		require.Zero(t, got[persistID(i)], "expired kill %s was delivered", persistID(i))
	}
	t.Logf("delivered %d distinct kills", len(got))
}

func mustGlob(t *testing.T, pat string) []string {
	m, err := filepath.Glob(pat)
	require.NoError(t, err)
	return m
}
