//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The figures the docs state about the agent's hook and the export delay
// (README, docs/latency.md) are measured by the end-to-end tests that hold
// them: each test records what it measured and fails when a measurement
// leaves the figure's bounds. With -update, the run writes what it
// measured to docs/generated/hook-figures.md (and its copy in
// docs/latency.md); TestHookFiguresDocMatchesTheTests checks, in every
// run, that the committed figures lie in the bounds the tests hold now and
// that the docs quote them. Several runs of each:
//
//	go test ./internal/e2e/ -count=3 -run 'LoopIsStoppedWithinACall|HookLatency' -update

var update = flag.Bool("update", false, "write the figures this run measured to "+figuresDoc)

const (
	figuresDoc = "docs/generated/hook-figures.md"
	latencyDoc = "docs/latency.md"
)

// figure is one number the docs state.
type figure struct {
	key  string
	what string
	// test is the test that measures and holds it.
	test string
	// lo and hi bound every measurement (inclusive); hi NaN: the test
	// holds an upper bound of its own (held says which).
	lo, hi float64
	// held says in words what the test holds, when the bounds do not.
	held string
	unit string
}

func (f figure) holds(v float64) bool {
	return v >= f.lo && (math.IsNaN(f.hi) || v <= f.hi)
}

func (f figure) heldText() string {
	switch {
	case f.held != "":
		return f.held
	case f.lo == f.hi:
		return formatValue(f.lo)
	case math.IsInf(f.hi, 1):
		return "≥ " + formatValue(f.lo)
	}
	return formatValue(f.lo) + "–" + formatValue(f.hi)
}

const (
	loopTest      = "TestClaudeCodeLoopIsStoppedWithinACall"
	geminiTest    = "TestGeminiCLILoopIsStoppedWithinACall"
	latencyTest   = "TestClaudeCodeHookLatency"
	codexTest     = "TestCodexCLILoopIsStoppedWithinACall"
	qwenTest      = "TestQwenCodeLoopIsStoppedWithinACall"
	openCodeTest  = "TestOpenCodeLoopIsStoppedWithinACall"
	subagentTest  = "TestOpenCodeSubagentLoopIsStopped"
	claudeSubTest = "TestClaudeCodeSubagentLoopIsStopped"
)

// killReachHeld is what the tests hold of a looping run's count at the
// 200 ms export (holdKillReach).
var killReachHeld = "≥ 5; none starts more than " + formatValue(killReach) + " s after the run that decided the kill"

// figures are the figures, in the order the generated doc lists them.
var figures = func() []figure {
	var fs []figure
	for _, h := range []struct{ key, name string }{{"http", "HTTP hook"}, {"command", "command hook"}} {
		fs = append(fs,
			figure{key: "claude." + h.key + ".obey.runs", what: "Claude Code, " + h.name + ", a model that obeys the nudge: runs of the loop's call (never past the kill point)", test: loopTest, lo: 2, hi: 5},
			figure{key: "claude." + h.key + ".obey.after_warn", what: "… of them after the collector's warn was decided (the nudge comes with the first call after the warn reaches the supervisor)", test: loopTest, lo: 1, hi: 3},
			figure{key: "claude." + h.key + ".obey.blocked", what: "… calls blocked", test: loopTest, lo: 0, hi: 0},
			figure{key: "claude." + h.key + ".ignore.runs", what: "Claude Code, " + h.name + ", a model that ignores the nudge: runs of the loop's call", test: loopTest, lo: 5, hi: math.NaN(), held: killReachHeld},
			figure{key: "claude." + h.key + ".ignore.after_kill", what: "… of them after the kill was decided", test: loopTest, lo: 0, hi: math.NaN(), held: "those that start within " + formatValue(killReach) + " s of it"},
			figure{key: "claude." + h.key + ".ignore.reach_s", what: "… seconds from the start of the run that decided the kill to the loop's last run", test: loopTest, lo: 0, hi: killReach, unit: "s"},
			figure{key: "claude." + h.key + ".ignore.blocked", what: "… calls blocked before the kill was carried out", test: loopTest, lo: 3, hi: 3},
		)
	}
	fs = append(fs, decisionFigures("claude", "Claude Code", loopTest)...)
	fs = append(fs, subagentFigures("claude", "Claude Code, HTTP hook, a subagent (Agent)", claudeSubTest)...)
	fs = append(fs, decisionFigures("gemini", "Gemini CLI", geminiTest)...)
	fs = append(fs, loopFigures("gemini", "Gemini CLI, command hooks", geminiTest, true)...)
	fs = append(fs,
		figure{key: "claude.nohook.export_200ms.runs", what: "Claude Code, no hook, --export-interval 200ms (the default): runs of the loop's call before the kill", test: loopTest, lo: 5, hi: math.NaN(), held: killReachHeld},
		figure{key: "claude.nohook.export_5s.runs", what: "Claude Code, no hook, the SDK's 5 s export delay: runs of the loop's call before the kill", test: loopTest, lo: 5, hi: math.NaN(),
			held: "≥ 5; none starts more than " + formatValue(5+killReach) + " s after the run that decided the kill"},
		figure{key: "claude.nohook.export_5s.call_s", what: "… seconds per loop call in that run (the pace)", test: loopTest, lo: 0, hi: math.Inf(1), unit: "s"},
	)
	for _, h := range []struct{ key, name string }{
		{"noop", "no-op command hook (`true`)"},
		{"command", "`loopsupervisor hook` (command)"},
		{"http", "HTTP hook to the supervisor (`/hook/claude`)"},
		{"emptyhttp", "HTTP hook to an empty server (the CLI's floor)"},
	} {
		fs = append(fs,
			figure{key: "latency." + h.key + ".p50", what: "Claude Code's own time for a hook (hook_execution_complete total_duration_ms), " + h.name + ": p50", test: latencyTest, lo: 0, hi: math.Inf(1), held: "measured", unit: "ms"},
			figure{key: "latency." + h.key + ".p99", what: "… p99", test: latencyTest, lo: 0, hi: math.Inf(1), held: "measured", unit: "ms"},
		)
	}
	fs = append(fs, loopFigures("codex", "Codex CLI, command hook", codexTest, false)...)
	fs = append(fs,
		figure{key: "codex.nohook.runs", what: "Codex CLI, no hook (an untrusted hook is skipped), 200 ms export: runs of the loop's call before the kill", test: codexTest, lo: 5, hi: maxLoopRunsNoHook},
		figure{key: "qwen.obey.stuck_run", what: "Qwen Code, a model that obeys the nudge: the loop's run at which the collector found the session stuck (its warn)", test: qwenTest, lo: 2, hi: 2},
		figure{key: "qwen.obey.runs", what: "… runs of the loop's call", test: qwenTest, lo: 2, hi: 5},
		figure{key: "qwen.obey.blocked", what: "… calls blocked", test: qwenTest, lo: 0, hi: 0},
		figure{key: "qwen.repeat.runs", what: "Qwen Code, a model that repeats the same call: runs before Qwen Code's own guard ends the run", test: qwenTest, lo: 4, hi: 4},
		figure{key: "qwen.cycle.stuck_run", what: "Qwen Code, a model that ignores the nudge and varies the call: the run at which the collector found the session stuck", test: qwenTest, lo: 2, hi: 5},
		figure{key: "qwen.cycle.kill_run", what: "… the run at which it decided the kill", test: qwenTest, lo: 5, hi: 5},
		figure{key: "qwen.cycle.blocked", what: "… calls blocked before the kill was carried out", test: qwenTest, lo: 3, hi: 3},
		figure{key: "qwen.cycle.reach_s", what: "… seconds from the start of the run that decided the kill to the loop's last run", test: qwenTest, lo: 0, hi: killReach, unit: "s"},
	)
	fs = append(fs, decisionFigures("opencode", "OpenCode", openCodeTest)...)
	fs = append(fs, loopFigures("opencode", "OpenCode, plugin", openCodeTest, false)...)
	fs = append(fs, subagentFigures("opencode", "OpenCode, a subagent (task)", subagentTest)...)
	fs = append(fs, figure{key: "latency.http_minus_noop.median", what: "the HTTP hook's time minus the no-op command hook's, call by call: median", test: latencyTest, lo: math.Inf(-1), hi: 0, held: "≤ 0", unit: "ms"})
	return fs
}()

// decisionFigures are where the collector's warn and kill fell among the
// runs of a CLI's loop (key: the figures' prefix).
func decisionFigures(key, client, test string) []figure {
	return []figure{
		{key: key + ".decision.stuck_run", what: client + ": the loop's run at which the collector found the session stuck (its warn)", test: test, lo: 2, hi: 2},
		{key: key + ".decision.kill_run", what: client + ": the loop's run at which it decided the kill", test: test, lo: 5, hi: 5},
	}
}

// loopFigures are what a model that obeys the nudge and one that ignores
// it did in a CLI's loop test with the supervisor's hook (how: the CLI and
// its hook); afterKill adds the runs after the kill was decided.
func loopFigures(key, how, test string, afterKill bool) []figure {
	fs := []figure{
		{key: key + ".obey.runs", what: how + ", a model that obeys the nudge: runs of the loop's call (never past the kill point)", test: test, lo: 2, hi: 5},
		{key: key + ".obey.blocked", what: "… calls blocked", test: test, lo: 0, hi: 0},
		{key: key + ".ignore.runs", what: how + ", a model that ignores the nudge: runs of the loop's call", test: test, lo: 5, hi: math.NaN(), held: killReachHeld},
	}
	if afterKill {
		fs = append(fs, figure{key: key + ".ignore.after_kill", what: "… of them after the kill was decided", test: test, lo: 0, hi: math.NaN(), held: "those that start within " + formatValue(killReach) + " s of it"})
	}
	return append(fs,
		figure{key: key + ".ignore.blocked", what: "… calls blocked before the kill was carried out", test: test, lo: 3, hi: 3},
		figure{key: key + ".ignore.reach_s", what: "… seconds from the start of the run that decided the kill to the loop's last run", test: test, lo: 0, hi: killReach, unit: "s"},
	)
}

// subagentFigures are what a CLI's subagent (who: the CLI and how its
// subagent is started) that loops and ignores the nudge did in its test.
func subagentFigures(key, who, test string) []figure {
	return []figure{
		{key: key + ".subagent.stuck_run", what: who + " that loops and ignores the nudge: the loop's run at which the collector found the subagent's session stuck", test: test, lo: 2, hi: 2},
		{key: key + ".subagent.kill_run", what: "… the run at which it decided the kill", test: test, lo: 5, hi: 5},
		{key: key + ".subagent.runs", what: "… runs of the loop's call", test: test, lo: 5, hi: math.NaN(), held: killReachHeld},
		{key: key + ".subagent.blocked", what: "… calls blocked before the kill was carried out", test: test, lo: 3, hi: 3},
		{key: key + ".subagent.reach_s", what: "… seconds from the start of the run that decided the kill to the loop's last run", test: test, lo: 0, hi: killReach, unit: "s"},
	}
}

// holdSubagentKilled holds of a run whose subagent looped, ignoring the
// nudge, what holdKilled holds of a main agent's loop, and records its
// subagentFigures under key.
func holdSubagentKilled(t *testing.T, key string, r agentRun) {
	t.Helper()
	o := measureLoop(t, r, 0)
	t.Logf("subagent's loop: %+v; result %s", o, r.result)
	reach := holdKilled(t, r, o)
	sessions := map[string]bool{}
	for _, tr := range r.transitions(t, nil) {
		if tr.To == "stuck" || tr.Kill {
			sessions[tr.Session] = true
		}
	}
	if len(sessions) != 1 {
		t.Errorf("want the warn and the kill of one session, the subagent's; got %v\n%s", sessions, r)
	}
	recordFigure(t, key+".subagent.stuck_run", float64(o.stuckRun))
	recordFigure(t, key+".subagent.kill_run", float64(o.killRun))
	recordFigure(t, key+".subagent.runs", float64(o.runs))
	recordFigure(t, key+".subagent.blocked", float64(o.blocked))
	recordFigure(t, key+".subagent.reach_s", math.Round(reach*100)/100)
}

// holdKilledAtOnce holds of a run whose subagent looped, where the hook
// cannot hold the kill (it hears the subagent under another name than the
// collector's), that one kill was decided and carried out with no call
// blocked first.
func holdKilledAtOnce(t *testing.T, r agentRun) {
	t.Helper()
	o := measureLoop(t, r, 0)
	t.Logf("subagent's loop: %+v; result %s", o, r.result)
	if r.exit != 86 || o.killRun == 0 || r.stuckKills() != 1 {
		t.Fatalf("want one kill decided (at run %d; %d logged) and carried out (exit 86)\n%s", o.killRun, r.stuckKills(), r)
	}
	if o.blocked != 0 {
		t.Errorf("want the kill carried out at once, got %d calls blocked first\n%s", o.blocked, r)
	}
	holdKillReach(t, r, o)
}

func figureByKey(key string) (figure, bool) {
	for _, f := range figures {
		if f.key == key {
			return f, true
		}
	}
	return figure{}, false
}

// measured holds what this test process measured, per figure key.
var measured = struct {
	sync.Mutex
	values map[string][]float64
}{values: map[string][]float64{}}

// recordFigure keeps a measurement of the figure key and fails t when it
// leaves the figure's bounds.
func recordFigure(t *testing.T, key string, v float64) {
	t.Helper()
	f, ok := figureByKey(key)
	if !ok {
		t.Fatalf("no figure %q", key)
	}
	if !f.holds(v) {
		t.Errorf("%s = %s, outside the bounds the test holds (%s): %s", key, formatValue(v), f.heldText(), f.what)
	}
	measured.Lock()
	measured.values[key] = append(measured.values[key], v)
	measured.Unlock()
}

func formatValue(v float64) string {
	if math.IsInf(v, 1) {
		return "∞"
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func formatValues(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = formatValue(v)
	}
	return strings.Join(parts, ", ")
}

// valueRange is how the docs quote a figure's runs: "3" or "3–4".
func valueRange(vs []float64) string {
	if len(vs) == 0 {
		return "?"
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if lo == hi {
		return formatValue(lo)
	}
	return formatValue(lo) + "–" + formatValue(hi)
}

// --- the generated doc --------------------------------------------------------

const figuresBegin = "<!-- generated:hook-figures (go test ./internal/e2e -update; see internal/e2e/figures_test.go) -->"
const figuresEnd = "<!-- end:hook-figures -->"

// renderFigures is the generated doc for values (by key), measured on the
// machine machine describes.
func renderFigures(values map[string][]float64, machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s\n\n", figuresBegin, machine)
	b.WriteString("| figure | measured | the test holds | key |\n|---|---|---|---|\n")
	for _, f := range figures {
		unit := ""
		if f.unit != "" {
			unit = " " + f.unit
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s | `%s` (%s) |\n", f.what, formatValues(values[f.key]), unit, f.heldText(), f.key, f.test)
	}
	b.WriteString("\n" + figuresEnd + "\n")
	return b.String()
}

// parseFigures reads the values of a generated doc, by key.
func parseFigures(doc string) (map[string][]float64, error) {
	values := map[string][]float64{}
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| figure ") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cols) != 4 {
			return nil, fmt.Errorf("figures row %q: want 4 columns", line)
		}
		key, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(cols[3]), "`"), "`")
		if !ok {
			return nil, fmt.Errorf("figures row %q: no key", line)
		}
		var vs []float64
		for _, s := range strings.Split(strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(cols[1], " ms"), " s")), ", ") {
			if s == "" {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("figures row %q: %w", line, err)
			}
			vs = append(vs, v)
		}
		values[key] = vs
	}
	return values, sc.Err()
}

// machineLine describes where and when the figures were measured.
func machineLine(root string) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Fields(string(b))[0]
	}
	commit := "?"
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("Measured %s on %d CPUs (`nproc`), CPU model %q (Linux), load average %s at the end; "+
		"Claude Code %s, Gemini CLI %s, Codex CLI %s, Qwen Code %s, OpenCode %s, each on a scripted model that answers at once; tree at %s. "+
		"A figure's measured values are one per run (`go test -count=N`).",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cpu, load,
		agentcli.ClaudeCodeVersion, agentcli.GeminiCLIVersion, agentcli.CodexCLIVersion, agentcli.QwenCodeVersion, agentcli.OpenCodeVersion, commit)
}

// writeFigures writes this run's figures to the generated doc and its copy
// in docs/latency.md. Every figure must have been measured.
func writeFigures() error {
	root, err := testproc.RepoRoot()
	if err != nil {
		return err
	}
	measured.Lock()
	values := measured.values
	measured.Unlock()
	var missing []string
	for _, f := range figures {
		if len(values[f.key]) == 0 {
			missing = append(missing, f.key)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("-update: not measured in this run: %v (run every test of the figures)", missing)
	}
	doc := renderFigures(values, machineLine(root))
	header := "# Hook figures\n\nGenerated by the end-to-end tests that hold each figure (internal/e2e/figures_test.go); do not edit.\n\n"
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(figuresDoc)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, figuresDoc), []byte(header+doc), 0o644); err != nil {
		return err
	}
	return replaceGenerated(filepath.Join(root, latencyDoc), doc)
}

// replaceGenerated puts block in place of the generated block in path.
func replaceGenerated(path, block string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(figuresBegin)), bytes.Index(b, []byte(figuresEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no generated hook-figures block", path)
	}
	out := append(append(append([]byte{}, b[:i]...), block...), bytes.TrimPrefix(b[j+len(figuresEnd):], []byte("\n"))...)
	return os.WriteFile(path, out, 0o644)
}

// generatedBlock is the generated block of a doc.
func generatedBlock(doc string) (string, bool) {
	i, j := strings.Index(doc, figuresBegin), strings.Index(doc, figuresEnd)
	if i < 0 || j < i {
		return "", false
	}
	return doc[i : j+len(figuresEnd)], true
}

// docClaims are the sentences the README and docs/latency.md state from
// the committed figures, by file.
func docClaims(v map[string][]float64) map[string][]string {
	return map[string][]string{
		"README.md": {
			fmt.Sprintf("the incident's loop ran %s times when the model obeyed the nudge", valueRange(v["claude.http.obey.runs"])),
			fmt.Sprintf("%s times, then %s blocked calls and the kill, when it ignored it", valueRange(v["claude.http.ignore.runs"]), valueRange(v["claude.http.ignore.blocked"])),
			fmt.Sprintf("HTTP hook at p50 %s ms, p99 %s ms, against %s ms and %s ms for a no-op command hook", valueRange(v["latency.http.p50"]), valueRange(v["latency.http.p99"]), valueRange(v["latency.noop.p50"]), valueRange(v["latency.noop.p99"])),
			fmt.Sprintf("the loop ran %s times before the kill at 200 ms, %s at the SDKs' 5 s (at %s s a call;", valueRange(v["claude.nohook.export_200ms.runs"]), valueRange(v["claude.nohook.export_5s.runs"]), valueRange(v["claude.nohook.export_5s.call_s"])),
		},
		"docs/clients.md": {
			fmt.Sprintf("the incident's loop ran %s times, %s calls blocked, killed (exit 86); a model that obeys the nudge ran it %s times and finished;",
				valueRange(v["codex.ignore.runs"]), valueRange(v["codex.ignore.blocked"]), valueRange(v["codex.obey.runs"])),
			fmt.Sprintf("is honoured) after %s runs;", valueRange(v["codex.nohook.runs"])),
			fmt.Sprintf("is stuck at its run %s and the nudge reaches the model with the next; a model that obeys changes course (%s runs, exit 0, nothing blocked).",
				valueRange(v["qwen.obey.stuck_run"]), valueRange(v["qwen.obey.runs"])),
			fmt.Sprintf("(%s runs, exit 1) before the collector's kill;", valueRange(v["qwen.repeat.runs"])),
			fmt.Sprintf("is stuck at run %s, killed at run %s after %s blocked calls (exit 86).",
				valueRange(v["qwen.cycle.stuck_run"]), valueRange(v["qwen.cycle.kill_run"]), valueRange(v["qwen.cycle.blocked"])),
			fmt.Sprintf("stuck at the loop's run %s, kill decided at run %s; a model that ignores the nudge ran it %s times, then %s calls were blocked and OpenCode was killed (exit 86); one that obeys changed course after %s runs, none blocked, not killed.",
				valueRange(v["opencode.decision.stuck_run"]), valueRange(v["opencode.decision.kill_run"]), valueRange(v["opencode.ignore.runs"]), valueRange(v["opencode.ignore.blocked"]), valueRange(v["opencode.obey.runs"])),
			fmt.Sprintf("a subagent that loops on the incident's call and ignores the nudge: stuck at its run %s, kill decided at run %s, it ran the call %s times, then %s calls were blocked and Claude Code was killed (exit 86).",
				valueRange(v["claude.subagent.stuck_run"]), valueRange(v["claude.subagent.kill_run"]), valueRange(v["claude.subagent.runs"]), valueRange(v["claude.subagent.blocked"])),
			fmt.Sprintf("subagent's session was stuck at its run %s, kill decided at run %s; it ran the call %s times, then %s calls were blocked and OpenCode was killed (exit 86).",
				valueRange(v["opencode.subagent.stuck_run"]), valueRange(v["opencode.subagent.kill_run"]), valueRange(v["opencode.subagent.runs"]), valueRange(v["opencode.subagent.blocked"])),
		},
	}
}

// TestHookFiguresDocMatchesTheTests: the committed figures lie in the
// bounds the tests hold now, docs/latency.md carries the generated doc's
// block as it is, and the README quotes the figures.
func TestHookFiguresDocMatchesTheTests(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the figures at the end of this run")
	}
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, figuresDoc))
	if err != nil {
		t.Fatalf("%v (measure the figures: see internal/e2e/figures_test.go)", err)
	}
	block, ok := generatedBlock(string(b))
	if !ok {
		t.Fatalf("%s: no generated block", figuresDoc)
	}
	values, err := parseFigures(block)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figures {
		vs := values[f.key]
		if len(vs) == 0 {
			t.Errorf("%s: figure %s missing: measure the figures again (-update)", figuresDoc, f.key)
		}
		for _, v := range vs {
			if !f.holds(v) {
				t.Errorf("%s: %s = %s is outside what %s holds now (%s): measure again (-update)", figuresDoc, f.key, formatValue(v), f.test, f.heldText())
			}
		}
		if !strings.Contains(block, "| "+f.heldText()+" | `"+f.key+"`") {
			t.Errorf("%s: %s does not state the bound %s holds now (%s): measure again (-update)", figuresDoc, f.key, f.test, f.heldText())
		}
	}
	lat, err := os.ReadFile(filepath.Join(root, latencyDoc))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := generatedBlock(string(lat)); !ok || got != block {
		t.Errorf("%s: its hook-figures block is not %s's (run -update)", latencyDoc, figuresDoc)
	}
	for file, claims := range docClaims(values) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		flat := strings.Join(strings.Fields(string(text)), " ")
		for _, c := range claims {
			if !strings.Contains(flat, c) {
				t.Errorf("%s does not state %q (from %s)", file, c, figuresDoc)
			}
		}
	}
}
