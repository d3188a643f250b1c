package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// The corpus's scripted sessions: what a model asks the real Claude Code
// CLI to do in a scratch repository (shopRepo), one session per entry.
// Healthy sessions are long, varied work; loop sessions are the shapes of
// docs/design.md after some ordinary work.

// corpusSession is one scripted session of the corpus.
type corpusSession struct {
	name string
	// loop is true for a session that ends in a loop.
	loop bool
	// script builds the model's steps for a project directory.
	script func(dir string) *script
}

// step is one tool call of a script; with until, it is repeated (at most
// max times) until its result satisfies until, as an agent polls.
type step struct {
	turn  agentcli.Turn
	until func(result string) bool
	max   int
}

// script is a model that plays its steps in order, one per tool result,
// and then ends the turn.
type script struct {
	steps []step
	subs  map[string]*script
}

func (s *script) add(turns ...agentcli.Turn) *script {
	for _, t := range turns {
		s.steps = append(s.steps, step{turn: t})
	}
	return s
}

func (s *script) poll(t agentcli.Turn, max int, until func(string) bool) *script {
	s.steps = append(s.steps, step{turn: t, until: until, max: max})
	return s
}

// task adds a Task call whose subagent plays sub.
func (s *script) task(prompt string, sub *script) *script {
	if s.subs == nil {
		s.subs = map[string]*script{}
	}
	s.subs[prompt] = sub
	s.steps = append(s.steps, step{turn: agentcli.Call("Task", map[string]any{
		"description": "search the code", "prompt": prompt, "subagent_type": "general-purpose",
	})})
	return s
}

func (s *script) Next(c agentcli.Conversation) agentcli.Turn {
	if sub, ok := s.subs[c.Prompt]; ok {
		return sub.Next(agentcli.Conversation{Results: c.Results})
	}
	i, reps := 0, 0
	for _, r := range c.Results {
		if i >= len(s.steps) {
			break
		}
		st := s.steps[i]
		if st.until != nil && !st.until(r.Content) && reps+1 < st.max {
			reps++
			continue
		}
		i, reps = i+1, 0
	}
	if i < len(s.steps) {
		return s.steps[i].turn
	}
	return agentcli.Done("done")
}

// work builds scripts from the things an agent does in shopRepo.
type work struct {
	s   *script
	dir string
	rng *rand.Rand
}

func newWork(dir string, seed uint64) *work {
	return &work{s: &script{}, dir: dir, rng: rand.New(rand.NewPCG(seed, 7))}
}

func (w *work) abs(rel string) string { return filepath.Join(w.dir, rel) }

func (w *work) bash(cmd string) *work { w.s.add(agentcli.Bash(cmd)); return w }

func (w *work) read(rel string) *work {
	w.s.add(agentcli.Call("Read", map[string]any{"file_path": w.abs(rel)}))
	return w
}

func (w *work) readPage(rel string, offset, limit int) *work {
	w.s.add(agentcli.Call("Read", map[string]any{"file_path": w.abs(rel), "offset": offset, "limit": limit}))
	return w
}

func (w *work) grep(pattern, path string) *work {
	in := map[string]any{"pattern": pattern, "output_mode": "content", "-n": true}
	if path != "" {
		in["path"] = w.abs(path)
	}
	w.s.add(agentcli.Call("Grep", in))
	return w
}

func (w *work) glob(pattern string) *work {
	w.s.add(agentcli.Call("Glob", map[string]any{"pattern": pattern}))
	return w
}

func (w *work) edit(rel, old, new string) *work {
	w.s.add(agentcli.Call("Edit", map[string]any{"file_path": w.abs(rel), "old_string": old, "new_string": new}))
	return w
}

func (w *work) write(rel, content string) *work {
	w.s.add(agentcli.Call("Write", map[string]any{"file_path": w.abs(rel), "content": content}))
	return w
}

func (w *work) pick(xs []string, n int) []string {
	p := w.rng.Perm(len(xs))
	out := make([]string, 0, n)
	for _, i := range p[:min(n, len(xs))] {
		out = append(out, xs[i])
	}
	return out
}

// explore looks around the repository: listings, history, file reads,
// searches.
func (w *work) explore(reads int) *work {
	w.bash("ls -la").bash("git log --oneline | head -20").glob("**/*.go")
	for _, f := range w.pick(shopSources, reads) {
		w.read(f)
	}
	for _, p := range w.pick(shopPatterns, 3+reads/3) {
		w.grep(p, "")
	}
	return w.bash("git status --short")
}

// fixPackage runs a package's failing tests, reads the code, and fixes its
// bugs one by one, re-running the same test after each edit; with a wrong
// first try, one edit does not fix anything.
func (w *work) fixPackage(pkg string, wrongTry bool) *work {
	b := shopBugs[pkg]
	test := "go test ./" + pkg + "/"
	w.bash(test).read(b.file).read(b.test)
	if wrongTry {
		w.edit(b.file, b.wrong[0], b.wrong[1]).bash(test)
	}
	for _, fix := range b.fixes {
		w.edit(b.file, fix[0], fix[1]).bash(test)
	}
	return w.bash("go vet ./" + pkg + "/")
}

// page reads a long file a page at a time, then greps it.
func (w *work) page(pages, size int) *work {
	w.bash("wc -l data/orders.csv")
	for i := 0; i < pages; i++ {
		w.readPage("data/orders.csv", 1+i*size, size)
	}
	return w.grep("refunded", "data/orders.csv")
}

// pageShell pages through a command's output with sed, as agents do with
// long listings.
func (w *work) pageShell(pages int) *work {
	for i := 0; i < pages; i++ {
		w.bash(fmt.Sprintf("sed -n '%d,%dp' data/orders.csv", 1+i*40, (i+1)*40))
	}
	return w
}

// pollJob starts the slow report job and polls its log until it is done.
func (w *work) pollJob(steps int) *work {
	w.bash(fmt.Sprintf("nohup sh scripts/report.sh %d > report.log 2>&1 &", steps))
	w.s.poll(agentcli.Bash("sleep 1; tail -n 1 report.log"), 40, func(r string) bool { return strings.Contains(r, "report done") })
	return w.read("report.log")
}

// grepSweep searches the code for several things and reads what it finds.
func (w *work) grepSweep(n int) *work {
	for _, p := range w.pick(shopPatterns, n) {
		w.grep(p, "")
		w.read(w.pick(shopSources, 1)[0])
	}
	return w
}

// feature writes a new file and its test and runs them.
func (w *work) feature(n int) *work {
	name := fmt.Sprintf("report%d", n)
	w.write("report/"+name+".go", fmt.Sprintf("package report\n\n// Line%d formats one report line.\nfunc Line%d(name string, n int) string {\n\treturn name + \": \" + itoa(n)\n}\n", n, n))
	w.write("report/"+name+"_test.go", fmt.Sprintf("package report\n\nimport \"testing\"\n\nfunc TestLine%d(t *testing.T) {\n\tif got := Line%d(\"apples\", %d); got != \"apples: %d\" {\n\t\tt.Fatal(got)\n\t}\n}\n", n, n, n, n))
	return w.bash("go test ./report/")
}

// git stages and commits the work.
func (w *work) git(msg string) *work {
	return w.bash("git diff --stat").bash("git add -A").bash(fmt.Sprintf("git commit -qm %q && git log --oneline | head -3", msg))
}

// healthySession is a long, varied session built from seed.
func healthySession(seed uint64) func(dir string) *script {
	return func(dir string) *script {
		w := newWork(dir, seed)
		w.explore(4 + int(seed%5))
		pkgs := w.pick([]string{"cart", "inventory", "textutil"}, 3)
		acts := []func(){
			func() { w.fixPackage(pkgs[0], seed%3 == 0) },
			func() { w.fixPackage(pkgs[1], seed%4 == 1) },
			func() { w.page(4+int(seed%6), 25) },
			func() { w.pollJob(4 + int(seed%4)) },
			func() { w.grepSweep(4 + int(seed%4)) },
			func() { w.feature(int(seed)); w.git("add a report line") },
			func() { w.pageShell(3 + int(seed%4)) },
		}
		if seed%2 == 0 {
			acts = append(acts, func() { w.fixPackage(pkgs[2], false) })
		}
		for _, i := range w.rng.Perm(len(acts)) {
			acts[i]()
		}
		w.bash("go test ./...").git("fix the failing tests")
		return w.s
	}
}

// subagentSession hands a code search to a subagent, then fixes a package.
func subagentSession(dir string) *script {
	w := newWork(dir, 99)
	w.explore(5)
	sub := newWork(dir, 100)
	sub.grepSweep(10)
	w.s.task("Find every place that computes a price and list the files.", sub.s)
	w.fixPackage("cart", true).page(6, 25).grepSweep(5).bash("go test ./...").git("fix cart")
	return w.s
}

func loopAfter(dir string, seed uint64, loop func(w *work)) *script {
	w := newWork(dir, seed)
	w.explore(5).fixPackage("textutil", false)
	loop(w)
	return w.s
}

func repeat(n int, f func(i int)) {
	for i := 0; i < n; i++ {
		f(i)
	}
}

// corpusSessions are the sessions the corpus holds, healthy and looping.
var corpusSessions = func() []corpusSession {
	var ss []corpusSession
	for i := uint64(1); i <= 22; i++ {
		ss = append(ss, corpusSession{name: fmt.Sprintf("healthy-%02d", i), script: healthySession(i)})
	}
	ss = append(ss, corpusSession{name: "healthy-subagent-search", script: subagentSession})
	loops := []struct {
		name string
		loop func(w *work)
	}{
		// The 1,972-call incident: the same valid pipeline again and again.
		{"loop-identical-call", func(w *work) {
			repeat(20, func(int) { w.bash("cat data/issues.txt | awk '{print $1}' | sort -n") })
		}},
		// Search/read oscillation with unchanged results.
		{"loop-search-read-oscillation", func(w *work) {
			repeat(12, func(int) { w.grep("TODO", "cart").read("cart/cart.go") })
		}},
		// A failure streak whose arguments vary around an error it never fixes.
		{"loop-failure-streak-varying-args", func(w *work) {
			repeat(14, func(i int) { w.bash(fmt.Sprintf("cat config/app-%d.yaml", i)) })
		}},
		// Calls to a tool that does not exist.
		{"loop-unknown-tool", func(w *work) {
			repeat(10, func(i int) {
				w.s.add(agentcli.Call("RunTests", map[string]any{"package": fmt.Sprintf("./pkg%d/...", i)}))
			})
		}},
		// A 4-step polling cycle over a job that never moves.
		{"loop-polling-cycle", func(w *work) {
			w.bash("printf 'state=running progress=40%%\\n' > job.status")
			repeat(8, func(int) {
				w.bash("cat job.status").bash("sleep 1").bash("ls -1 scripts").read("report/report.go")
			})
		}},
		// A paging sweep that wraps around to its first page.
		{"loop-paging-wraps", func(w *work) {
			repeat(4, func(int) {
				repeat(4, func(p int) { w.readPage("data/orders.csv", 1+p*25, 25) })
			})
		}},
		// A finished task's result read again and again.
		{"loop-terminal-reread", func(w *work) {
			w.bash("printf 'state=complete rows=500 file=out/report.csv\\n' > job.status")
			repeat(14, func(int) { w.bash("cat job.status") })
		}},
		// The same failing test again and again, nothing edited between.
		{"loop-same-failing-test", func(w *work) {
			repeat(14, func(int) { w.bash("go test ./cart/") })
		}},
	}
	for i, l := range loops {
		loop := l.loop
		seed := uint64(200 + i)
		ss = append(ss, corpusSession{name: l.name, loop: true, script: func(dir string) *script { return loopAfter(dir, seed, loop) }})
	}
	return ss
}()
