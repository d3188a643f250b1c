// Command audit measures loopreplay's audit of past sessions at scale and
// writes what it measured to BENCHMARKS-audit.md: it writes a history of
// generated sessions of mixed CLIs (internal/benchdata/sessions), runs
// `loopreplay --summary` (and `--summary --html`) over the first -small
// and all -sessions of them, -runs times each, and reads each run's wall
// time, and its CPU time and peak RSS as GNU time (/usr/bin/time, Debian
// package time) reads them when it ends: the resource usage Go reads of
// its own child would count the measuring program's memory too, since a
// child started with vfork shares it until exec. A run is counted only
// when loopreplay read what was written: every session, the files with a
// shell's complaints read in part, none skipped, each read as the format
// it was written in.
//
//	go run ./internal/benchdata/audit -loopreplay bin/loopreplay -testdata cmd/loopreplay/testdata -out BENCHMARKS-audit.md
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/sessions"
)

func main() {
	bin := flag.String("loopreplay", "bin/loopreplay", "the loopreplay binary to measure")
	testdata := flag.String("testdata", "cmd/loopreplay/testdata", "the recorded sessions the history is made of")
	n := flag.Int("sessions", 1000, "sessions in the history")
	small := flag.Int("small", 100, "sessions of the smaller audit, to see memory against the number of files")
	runs := flag.Int("runs", 3, "runs of each audit")
	out := flag.String("out", "BENCHMARKS-audit.md", "file to write")
	dir := flag.String("dir", "", "where to write the history (default a temporary directory, removed after)")
	flag.Parse()
	if err := measure(*bin, *testdata, *n, *small, *runs, *out, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "audit:", err)
		os.Exit(1)
	}
}

// history is the generated sessions.
type history struct {
	dir   string
	files []sessions.File
	took  time.Duration
}

// run is one measured run of loopreplay.
type run struct {
	wall, cpu time.Duration
	// rss is the peak resident set size in bytes.
	rss int64
	sum summary
}

// summary is the part of loopreplay's --summary a run is checked by.
type summary struct {
	Message string `json:"message"`
	Read    struct {
		Files        map[string]int `json:"files_by_format"`
		ToolCalls    int64          `json:"tool_calls"`
		SkippedFiles []any          `json:"skipped_files"`
		ReadInPart   []any          `json:"read_in_part"`
	} `json:"read"`
	Sessions []struct {
		ParentSession string `json:"parent_session"`
	} `json:"sessions"`
	States map[string]int `json:"final_states"`
}

// audit is the runs of one audit: a number of files, with or without the page.
type audit struct {
	files int
	bytes int64
	page  bool
	runs  []run
}

func measure(bin, testdata string, n, small, runs int, out, dir string) error {
	if _, err := os.Stat(gnuTime); err != nil {
		return fmt.Errorf("%s (GNU time, Debian package time) reads the child's peak RSS: %w", gnuTime, err)
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "loopreplay-audit-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	start := time.Now()
	files, err := sessions.Generate(dir, sessions.Options{Testdata: testdata, Sessions: n, Spacing: spacing, NoisyEvery: noisyEvery})
	if err != nil {
		return err
	}
	h := &history{dir: dir, files: files, took: time.Since(start)}
	fmt.Fprintf(os.Stderr, "audit: wrote %d sessions, %.1f MB, in %s\n", len(files), mb(h.bytes(len(files))), h.took.Round(time.Millisecond))
	var audits []*audit
	for _, page := range []bool{false, true} {
		for _, size := range []int{small, n} {
			a := &audit{files: size, bytes: h.bytes(size), page: page}
			for i := range runs {
				r, err := h.run(bin, size, page)
				if err != nil {
					return fmt.Errorf("%d files, run %d: %w", size, i+1, err)
				}
				fmt.Fprintf(os.Stderr, "audit: %d files%s: %s, %.1f MB peak RSS\n", size, pageFlag(page), r.wall.Round(time.Millisecond), mb(r.rss))
				a.runs = append(a.runs, r)
			}
			audits = append(audits, a)
		}
	}
	return os.WriteFile(out, []byte(report(h, audits, bin)), 0o644)
}

// The history's shape: a session every 20 minutes (about two weeks of
// work for 1,000), and a shell's complaints before one stream-json
// output in 50, as two of seven real ones had them.
const (
	spacing    = 20 * time.Minute
	noisyEvery = 50
)

func (h *history) bytes(n int) int64 {
	var b int64
	for _, f := range h.files[:n] {
		b += f.Bytes
	}
	return b
}

// run runs loopreplay over the first n files and checks what it read.
func (h *history) run(bin string, n int, page bool) (run, error) {
	args := []string{"--summary"}
	if page {
		args = append(args, "--html", filepath.Join(h.dir, "audit.html"))
	}
	noisy := 0
	for _, f := range h.files[:n] {
		args = append(args, f.Path)
		if f.Noisy {
			noisy++
		}
	}
	usage := filepath.Join(h.dir, "usage.txt")
	cmd := exec.Command(gnuTime, append([]string{"-f", "%M %U %S", "-o", usage, bin}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	want := 0
	if noisy > 0 {
		want = 3 // some files read in part
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return run{}, err
	}
	if code := cmd.ProcessState.ExitCode(); code != want {
		return run{}, fmt.Errorf("exit %d, want %d: %s", code, want, tail(stderr.String()))
	}
	r := run{wall: wall}
	var kb int64
	var user, sys float64
	if u, err := os.ReadFile(usage); err != nil {
		return run{}, err
	} else if _, err := fmt.Sscan(lastLine(string(u)), &kb, &user, &sys); err != nil {
		return run{}, fmt.Errorf("%s: %q: %w", gnuTime, u, err)
	}
	r.rss, r.cpu = kb<<10, time.Duration((user+sys)*float64(time.Second))
	b := stderr.Bytes()
	i := bytes.Index(b, []byte("{\n"))
	if i < 0 {
		return run{}, fmt.Errorf("no summary: %s", tail(stderr.String()))
	}
	if err := json.Unmarshal(b[i:], &r.sum); err != nil {
		return run{}, fmt.Errorf("summary: %w", err)
	}
	if err := check(&r.sum, h.files[:n]); err != nil {
		return run{}, err
	}
	return r, nil
}

// check says what a summary missed of the files given: a file skipped
// or not read as the format it was written in, the noisy ones not read
// in part, two copies' sessions merged into one.
func check(sum *summary, given []sessions.File) error {
	n, noisy := len(given), 0
	kinds := map[string]int{}
	for _, f := range given {
		kinds[f.Kind.String()]++
		if f.Noisy {
			noisy++
		}
	}
	files := 0
	for _, v := range sum.Read.Files {
		files += v
	}
	mains := 0
	for _, s := range sum.Sessions {
		if s.ParentSession == "" {
			mains++
		}
	}
	switch {
	case len(sum.Read.SkippedFiles) > 0:
		return fmt.Errorf("%d files skipped: %s", len(sum.Read.SkippedFiles), sum.Message)
	case len(sum.Read.ReadInPart) != noisy:
		return fmt.Errorf("%d files read in part, want the %d written so", len(sum.Read.ReadInPart), noisy)
	case files < n:
		return fmt.Errorf("read %d files of %d: %s", files, n, sum.Message)
	case mains < n:
		return fmt.Errorf("%d sessions of %d: %s", mains, n, sum.Message)
	}
	// Each file read as what it is (a Claude Code session's subagent
	// transcripts count too).
	for k := sessions.Kind(0); int(k) < len(sessions.DefaultMix); k++ {
		if got, want := sum.Read.Files[k.String()], kinds[k.String()]; got < want {
			return fmt.Errorf("read %d %s files of %d: %s", got, k, want, sum.Message)
		}
	}
	return nil
}

// gnuTime runs a command and writes its peak RSS (KiB) and CPU time.
const gnuTime = "/usr/bin/time"

// lastLine is the last line of s: GNU time writes "Command exited with
// non-zero status 3" before the figures.
func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

func pageFlag(page bool) string {
	if page {
		return " --html"
	}
	return ""
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// median of each run's value.
func median(runs []run, v func(run) float64) float64 {
	x := make([]float64, len(runs))
	for i, r := range runs {
		x[i] = v(r)
	}
	sort.Float64s(x)
	if len(x)%2 == 1 {
		return x[len(x)/2]
	}
	return (x[len(x)/2-1] + x[len(x)/2]) / 2
}

func peak(runs []run) int64 {
	var m int64
	for _, r := range runs {
		m = max(m, r.rss)
	}
	return m
}

// report writes the figures in Markdown.
func report(h *history, audits []*audit, bin string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	all := audits[1]
	w("# Audit of past sessions at scale\n\n")
	w("Written by `make bench-audit` (`internal/benchdata/audit`), which measured it; do not edit by hand. ")
	w("Machine: %s, %d CPUs, %s/%s, %s; commit %s; %s; load average when done %s.\n\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		runtime.Version(), commit(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAverage())
	kinds := map[sessions.Kind]int{}
	noisy := 0
	for _, f := range h.files {
		kinds[f.Kind]++
		if f.Noisy {
			noisy++
		}
	}
	w("**The history**: %d sessions, %.1f MB on disk, written in %.1f s by `internal/benchdata/sessions` from the sessions the real CLIs recorded in `cmd/loopreplay/testdata` (each copy a session of its own: every id new, its times moved to its own start, a session every %.0f minutes, %.1f days of work): ",
		len(h.files), mb(h.bytes(len(h.files))), h.took.Seconds(), spacing.Minutes(), float64(len(h.files))*spacing.Hours()/24)
	var parts []string
	for k := sessions.Kind(0); int(k) < len(sessions.DefaultMix); k++ {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	w("%s files; %d stream-json outputs begin with a shell's complaints (as two of seven real ones did), which loopreplay reads from their first JSON line, saying so (exit 3).\n\n", strings.Join(parts, ", "), noisy)
	w("**The audit**: `%s --summary FILE…` (and with `--html PAGE`), %d runs each, the first %d files and all %d. Every run was checked: every file read as what it is, every session listed, the noisy files read in part and none skipped. CPU time (user + system) and peak RSS are loopreplay's as GNU time reads them; files/s and MB/s are given per second of median wall time and, steadier on a shared machine, per second of median CPU time.\n\n",
		filepath.Base(bin), len(all.runs), audits[0].files, all.files)
	w("| audit | files | MB | wall (median) | files/s | MB/s | CPU (median) | files per CPU-s | MB per CPU-s | peak RSS (largest) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range audits {
		wall := median(a.runs, func(r run) float64 { return r.wall.Seconds() })
		cpu := median(a.runs, func(r run) float64 { return r.cpu.Seconds() })
		w("| `--summary%s` | %d | %.1f | %.2f s | %.0f | %.1f | %.2f s | %.0f | %.1f | %.1f MB |\n", pageFlag(a.page), a.files, mb(a.bytes), wall,
			float64(a.files)/wall, mb(a.bytes)/wall, cpu, float64(a.files)/cpu, mb(a.bytes)/cpu, mb(peak(a.runs)))
	}
	ratio := float64(peak(audits[1].runs)) / float64(peak(audits[0].runs))
	grow := float64(audits[1].bytes) / float64(audits[0].bytes)
	w("\nPeak RSS of `--summary` at %d files over that at %d: **%.2f×**, for %.1f× the files and %.1f× the bytes: ",
		all.files, audits[0].files, ratio, float64(all.files)/float64(audits[0].files), grow)
	if ratio < 1.5 {
		w("memory does not grow with the number of files. The audit reads the files one after another in order of their first call, holding at once only those whose sessions ran at the same time, and keeps a line per session.\n\n")
	} else {
		w("memory grows with the number of files: the audit does not stream as it should.\n\n")
	}
	pageRatio := float64(peak(audits[3].runs)) / float64(peak(audits[2].runs))
	w("With `--html`, the page keeps an entry per tool call for its timelines: peak RSS %.2f× at %d files over %d.\n\n", pageRatio, audits[3].files, audits[2].files)
	s := all.runs[0].sum
	w("What the audit of all %d said: %s.\n", all.files, s.Message)
	return b.String()
}

// loadAverage is the machine's one-minute load average, which says how
// much the wall times were shared.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// commit names the measured commit, "-dirty" when the tree has changes
// other than the file this writes.
func commit() string {
	c, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(c))
	if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)BENCHMARKS-audit.md").Output(); len(bytes.TrimSpace(st)) > 0 {
		s += "-dirty"
	}
	return s
}
