// Package testproc holds what the process-level tests (internal/e2e,
// internal/scaleout) share: the repository root, compiling binaries once per
// test process, loopback ports, webhook secrets, and processes started from a
// test, stopped by PID at cleanup, with polling under a deadline. It imports
// nothing testing-specific but package testing.
package testproc

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// --- the repository and its binaries -----------------------------------------

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory (a test's package directory) holding
// builder-config.yaml.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "builder-config.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root not found: no builder-config.yaml at or above the working directory")
		}
		dir = parent
	}
}

// Builds compiles a test process's binaries once, into one temporary
// directory that Remove deletes (call it from TestMain after m.Run).
type Builds struct {
	Pattern string // os.MkdirTemp pattern of the directory

	once sync.Once
	dir  string
	err  error
}

// Once runs build the first time it is called, with the repository root and
// a new temporary directory; every call fails t if that build failed.
func (b *Builds) Once(t testing.TB, build func(root, dir string) error) {
	t.Helper()
	b.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			b.err = err
			return
		}
		if b.dir, err = os.MkdirTemp("", b.Pattern); err != nil {
			b.err = err
			return
		}
		b.err = build(root, b.dir)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
}

// Remove deletes the temporary directory, if one was made.
func (b *Builds) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// GoBuild runs `go build -trimpath -o out pkg` in dir. logf, when not nil,
// is told how long it took.
func GoBuild(logf func(format string, args ...any), dir, out, pkg string) error {
	start := time.Now()
	cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	if logf != nil {
		logf("built %s in %s", filepath.Base(out), time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// BinFromEnv returns the binary the environment variable name points to, or
// "" when it is unset or names a missing file (which logf is told).
func BinFromEnv(logf func(format string, args ...any), name string) string {
	p := os.Getenv(name)
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		logf("$%s=%s is missing; building it", name, p)
		return ""
	}
	return p
}

// RequireTool returns the tool binary the environment variable name points
// to (set by the make target that installs it). When it is absent the test
// fails under CI=true, where `make test` must have installed it, and is
// skipped elsewhere with the make target to run.
func RequireTool(t testing.TB, name, makeTarget string) string {
	t.Helper()
	p := os.Getenv(name)
	if p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("$%s=%q is not an installed binary; run `make %s` (or `make test`)", name, p, makeTarget)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// --- ports and secrets -------------------------------------------------------

var (
	portsMu   sync.Mutex
	portsSeen = map[int]bool{}
)

// FreePort returns a loopback TCP port that was free a moment ago and that
// this process has not handed out before.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsSeen[p] {
			portsSeen[p] = true
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// NewSecret returns a random Standard Webhooks secret (whsec_ + base64 of 32
// bytes).
func NewSecret(t testing.TB) string {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k[:])
}

// --- processes ---------------------------------------------------------------

// Proc is a process a test started; t.Cleanup stops it by PID.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string // stdout+stderr, or stderr when stdout is separate
	// LogTail, when > 0, limits the log quoted in Wait's and WaitHealthy's
	// failures to its last LogTail bytes.
	LogTail int

	done chan struct{}
	err  error
}

// Start runs argv with extra environment, its stderr (and stdout unless
// stdoutPath is set) to files in dir. Files, not pipes: a child the process
// starts inherits them, and Wait must not hang on a pipe a child holds.
func Start(t testing.TB, dir, name string, env []string, stdoutPath string, argv ...string) *Proc {
	t.Helper()
	return StartIn(t, "", dir, name, env, stdoutPath, argv...)
}

// StartIn is Start with the process's working directory set to workdir
// (the test's own when empty).
func StartIn(t testing.TB, workdir, dir, name string, env []string, stdoutPath string, argv ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	out := logf
	if stdoutPath != "" {
		if out, err = os.Create(stdoutPath); err != nil {
			t.Fatal(err)
		}
		defer out.Close()
	}
	p.Cmd = exec.Command(argv[0], argv[1:]...)
	p.Cmd.Dir = workdir
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = out, logf
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop(t, 10*time.Second) })
	return p
}

// Stop sends SIGTERM to the PID, waits up to grace, then SIGKILL. Idempotent.
func (p *Proc) Stop(t testing.TB, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	t.Logf("%s (pid %d) still running %s after SIGTERM: SIGKILL", p.Name, p.Cmd.Process.Pid, grace)
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Wait waits up to d for the process to exit and returns its exit code.
func (p *Proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s; log:\n%s", p.Name, d, p.quotedLog())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("%s: %v", p.Name, p.err)
		return -1
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LogText returns the log written so far.
func (p *Proc) LogText() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

func (p *Proc) quotedLog() string {
	if p.LogTail > 0 {
		return Tail(p.LogText(), p.LogTail)
	}
	return p.LogText()
}

// WaitHealthy polls the process's health_check endpoint on loopback port
// until it answers 200, for at most d; it fails t if the process exits or
// the deadline passes first.
func (p *Proc) WaitHealthy(t testing.TB, port int, d time.Duration) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	ok := Eventually(d, func() bool {
		if p.Exited() {
			return true
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok || p.Exited() {
		t.Fatalf("%s not healthy (exited: %v); log:\n%s", p.Name, p.Exited(), p.quotedLog())
	}
}

// Tail returns the last n bytes of s, marked as cut when it is longer.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Eventually polls cond every 20 ms until it is true or d has passed.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
