package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// recordEnv, set to a regular expression of session names ("." for all),
// re-records those corpus sessions with the real Claude Code CLI
// ($CLAUDE_CODE_BIN) into testdata/transcripts; then run the corpus test
// with -update to write their verdicts.
const recordEnv = "LOOPREPLAY_RECORD_CORPUS"

const corpusDir = "testdata/transcripts"

// corpusPrompt is the task every corpus session is given.
const corpusPrompt = "Get the test suite of this repository green, look into the sales report, and commit your work."

// TestRecordTranscriptCorpus runs every corpus session's script with the
// real CLI on a scripted local model in a fresh copy of shopRepo, and keeps
// what the CLI wrote: its session transcripts (gzip-compressed, as they lie
// under ~/.claude/projects) and its stream-json output.
func TestRecordTranscriptCorpus(t *testing.T) {
	pattern := os.Getenv(recordEnv)
	if pattern == "" {
		t.Skip("set " + recordEnv + " to re-record the transcript corpus with the real CLI")
	}
	match := regexp.MustCompile(pattern)
	bin := agentcli.ClaudeBin(t)
	root := filepath.Join(os.TempDir(), "loopreplay-corpus")
	cache := filepath.Join(root, "gocache")
	warmGoCache(t, root, cache)
	// Two sessions at a time: the CLI and go test share the machine.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, s := range corpusSessions {
		if !match.MatchString(s.name) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(s.name, func(t *testing.T) { recordSession(t, bin, root, cache, s) })
		}()
	}
	wg.Wait()
}

func recordSession(t *testing.T, bin, root, cache string, s corpusSession) {
	dir := filepath.Join(root, s.name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	p := agentcli.NewClaudeProject(t, dir, "")
	writeShopRepo(t, p.Dir)
	sc := s.script(p.Dir)
	srv := agentcli.Start(t, sc)
	args := agentcli.ClaudeArgs(bin, corpusPrompt)
	args[len(args)-1] += ",Task"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = append(p.Env(srv, ""), goEnv(root, cache)...)
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stream, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, stderr.String())
	}
	out := filepath.Join(corpusDir, s.name)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	writeGzip(t, filepath.Join(out, streamFile), stream)
	projects := filepath.Join(p.Home, ".claude", "projects")
	err = filepath.WalkDir(projects, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		// The project directory's name is the scratch path: the corpus
		// keeps the layout under it.
		rel, _ := filepath.Rel(projects, path)
		_, rel, _ = strings.Cut(rel, string(filepath.Separator))
		switch {
		case strings.HasSuffix(path, ".jsonl"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			writeGzip(t, filepath.Join(out, rel+".gz"), b)
		case strings.HasSuffix(path, ".meta.json"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return writeFile(filepath.Join(out, rel), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d model turns", s.name, len(srv.Exchanges()))
}

// goEnv lets the sessions' go commands share a build cache and never
// reach the network.
func goEnv(root, cache string) []string {
	return []string{"GOCACHE=" + cache, "GOPATH=" + filepath.Join(root, "gopath"), "GOTOOLCHAIN=local", "GOPROXY=off"}
}

// warmGoCache builds shopRepo's tests once, so a session's first go test
// does not compile the standard library under the CLI's 2-minute timeout.
func warmGoCache(t *testing.T, root, cache string) {
	dir := filepath.Join(root, "warm")
	_ = os.RemoveAll(dir)
	writeShopRepo(t, dir)
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv(root, cache)...)
	_ = cmd.Run() // the tests fail: the bugs are the point
	cmd = exec.Command("go", "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv(root, cache)...)
	_ = cmd.Run()
}

// streamFile is the name of a corpus session's stream-json output.
const streamFile = "stream-json.jsonl.gz"

func writeGzip(t *testing.T, path string, b []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
