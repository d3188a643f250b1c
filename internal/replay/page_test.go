package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of the 1,972-call incident's replay page to this PNG file")

const (
	seed000     = "../../testdata/scenarios/s000-bash-loop"
	claudeLogs  = "../../cmd/loopreplay/testdata/claude-code/logs.jsonl"
	browserHint = "install Debian's chromium (make chromium) or set LOOPREPLAY_CHROMIUM"
)

// replayFiles replays inputs with the default config, as loopreplay does.
func replayFiles(t testing.TB, inputs ...string) (*Summary, *Result) {
	t.Helper()
	in := &Input{}
	for _, p := range inputs {
		f, err := os.Open(p)
		require.NoError(t, err)
		require.NoError(t, in.Add(f, p))
		require.NoError(t, f.Close())
	}
	cfg, err := Config(nil)
	require.NoError(t, err)
	res, err := Run(context.Background(), cfg, in.Batches)
	require.NoError(t, err)
	sum := Summarize(cfg, in, res)
	return &sum, res
}

func writePageFile(t testing.TB, p *Page) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.html")
	var b bytes.Buffer
	require.NoError(t, WritePage(&b, p))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}

// goldenKill is the kill line of a scenario's golden transitions.
func goldenKill(t *testing.T, dir string) Line {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "transitions.golden.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l Line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		if l.Kill {
			return l
		}
	}
	t.Fatalf("%s: no kill in the golden transitions", dir)
	return Line{}
}

// TestPageIsSelfContained: the page loads nothing from anywhere; session
// names and explanations cannot break out of its data block.
func TestPageIsSelfContained(t *testing.T) {
	sum, res := replayFiles(t, filepath.Join(seed000, "input.jsonl"))
	res.Calls[0].Session = `</script><script>alert(1)</script>`
	var b bytes.Buffer
	require.NoError(t, WritePage(&b, PageOf([]string{"<x>.jsonl"}, sum, res)))
	page := b.String()
	for _, ref := range []string{"http://", "https://", "src=", "<link", "@import", "url("} {
		require.NotContains(t, page, ref)
	}
	require.Equal(t, 2, strings.Count(page, "<script"), "only the data block and the page's own script")
	require.Contains(t, page, "<title>loopreplay: &lt;x&gt;.jsonl</title>")
}

// TestPageOrdersKilledSessionsFirst: rows start with the sessions that
// were killed, and every counted call is a cell in the engine's order.
func TestPageOrdersKilledSessionsFirst(t *testing.T) {
	sum, res := replayFiles(t, filepath.Join(seed000, "..", "healthy-edit-test", "input.jsonl"), claudeLogs)
	p := PageOf([]string{"a", "b"}, sum, res)
	require.Len(t, p.Sessions, 2)
	require.Positive(t, p.Sessions[0].Kills)
	require.Equal(t, "stuck", p.Sessions[0].FinalState)
	require.Equal(t, "working", p.Sessions[1].FinalState)
	for i, s := range p.Sessions {
		require.Len(t, s.States, sum.sessionCalls(s.Session), "row %d", i)
		require.Len(t, s.Tool, len(s.States))
	}
	// The claude session: uncertain from its 8th call, stuck from its 11th.
	require.Equal(t, strings.Repeat("w", 7)+strings.Repeat("u", 3)+strings.Repeat("s", 10), p.Sessions[0].States)
}

func (s *Summary) sessionCalls(key string) int {
	for _, ss := range s.Sessions {
		if ss.Session == key {
			return ss.Calls
		}
	}
	return -1
}

// browser starts headless Chromium for one test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("LOOPREPLAY_CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Skip("no chromium: " + browserHint)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		// Without these Chromium keeps calling home over the closed network.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// consoleErrors collects what the page reports as errors.
type consoleErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (c *consoleErrors) listen(t *testing.T, ctx context.Context) {
	t.Helper()
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		var m string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			m = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				m += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				m = fmt.Sprintf("console.%s", e.Type)
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				m = "log: " + e.Entry.Text + " " + e.Entry.URL
			}
		}
		if m != "" {
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.mu.Unlock()
		}
	}))
}

func (c *consoleErrors) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.msgs...)
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

// TestPageInBrowser loads pages in one headless Chromium, a tab each.
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	t.Run("the 1,972-call incident and a Claude Code session", func(t *testing.T) { testSeed000Page(t, tab(t, ctx)) })
	t.Run("100 sessions of 1,000 calls", func(t *testing.T) { testLargePage(t, tab(t, ctx)) })
	t.Run("screenshot of the 1,972-call incident", func(t *testing.T) { testSeed000Screenshot(t, tab(t, ctx)) })
	t.Run("the session list sorts and links to timelines", func(t *testing.T) { testSessionList(t, tab(t, ctx)) })
}

func tab(t *testing.T, browser context.Context) context.Context {
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	return ctx
}

// testSeed000Page: the seed-000 replay, with a Claude Code session beside
// it, loads without console errors, shows a row per session and a cell
// per call, and marks the kill on the call the golden names; clicking it
// shows the explanation.
func testSeed000Page(t *testing.T, ctx context.Context) {
	var errs consoleErrors
	errs.listen(t, ctx)

	kill := goldenKill(t, seed000)
	sum, res := replayFiles(t, filepath.Join(seed000, "input.jsonl"), claudeLogs)
	path := writePageFile(t, PageOf([]string{"s000-bash-loop/input.jsonl", "claude-code/logs.jsonl"}, sum, res))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate("file://"+path),
		chromedp.WaitReady("#rows .row"),
	))
	require.True(t, eval[bool](t, ctx, `window.loopreplayReady === true`))

	rows := eval[[]string](t, ctx, `[...document.querySelectorAll("#rows .row")].map(r => r.dataset.session)`)
	require.Len(t, rows, len(sum.Sessions))
	for _, s := range sum.Sessions {
		n := eval[int](t, ctx, fmt.Sprintf(`document.querySelector(%q).querySelectorAll(".c").length`, rowSelector(s.Session)))
		require.Equal(t, s.Calls, n, "cells of %s", s.Session)
	}
	total := eval[int](t, ctx, `document.querySelectorAll("#rows .c").length`)
	require.Equal(t, int(sum.Read.ToolCalls-sum.Read.Skipped["repeated_delivery"]), total)

	// The kill cell of the 1,972-call incident's golden: its row and its position.
	at := eval[struct {
		Session string `json:"session"`
		Call    int    `json:"call"`
		Data    string `json:"data"`
	}](t, ctx, fmt.Sprintf(`(() => { const r = document.querySelector(%q); const k = r.querySelector(".c.k");
		return {session: r.dataset.session, call: [...k.parentNode.children].indexOf(k) + 1, data: k.dataset.call}; })()`, rowSelector(kill.Session)))
	require.Equal(t, kill.Session, at.Session)
	require.EqualValues(t, kill.CallIndex, at.Call)
	require.Equal(t, fmt.Sprint(kill.CallIndex), at.Data)
	require.Equal(t, 1, eval[int](t, ctx, fmt.Sprintf(`document.querySelector(%q).querySelectorAll(".c.k").length`, rowSelector(kill.Session))))
	// Killed sessions come first.
	require.Equal(t, 2, eval[int](t, ctx, `[...document.querySelectorAll("#rows .row")].slice(0, 2).filter(r => r.querySelector(".c.k")).length`))

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(rowSelector(kill.Session)+" .c.k")))
	detail := eval[string](t, ctx, `document.getElementById("detail").textContent`)
	require.Contains(t, detail, fmt.Sprintf("Call %d of", kill.CallIndex))
	require.Contains(t, detail, kill.Explanation)
	require.Contains(t, detail, "KILL")
	require.Contains(t, detail, kill.Reason)
	require.Empty(t, errs.all())
}

func rowSelector(session string) string {
	return fmt.Sprintf(`#rows .row[data-session=%q]`, session)
}

// testSeed000Screenshot: the seed-000 page, its kill clicked, fits the
// README's picture with the kill cell and its explanation in view. With
// -screenshot FILE (make screenshot) the picture is written there.
func testSeed000Screenshot(t *testing.T, ctx context.Context) {
	kill := goldenKill(t, seed000)
	sum, res := replayFiles(t, filepath.Join(seed000, "input.jsonl"))
	path := writePageFile(t, PageOf([]string{"testdata/scenarios/s000-bash-loop/input.jsonl"}, sum, res))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 560),
		chromedp.Navigate("file://"+path),
		chromedp.WaitReady("#rows .row"),
		chromedp.Click(rowSelector(kill.Session)+" .c.k"),
	))
	inView := eval[bool](t, ctx, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
		return r.top >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; })()`, rowSelector(kill.Session)+" .c.k"))
	require.True(t, inView, "the kill cell is in the picture")
	require.Contains(t, eval[string](t, ctx, `document.getElementById("detail").textContent`), kill.Explanation)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(shot, []byte("\x89PNG")), "a PNG")
	out := *screenshot
	if out == "" {
		out = filepath.Join(t.TempDir(), "seed000.png")
	}
	require.NoError(t, os.WriteFile(out, shot, 0o644))
}

// testLargePage: 100 sessions of 1,000 calls render in full (100,000
// cells) without errors.
func testLargePage(t *testing.T, ctx context.Context) {
	var errs consoleErrors
	errs.listen(t, ctx)
	p := largePage(100, 1000)
	path := writePageFile(t, p)
	// Navigate returns after the load event, when the page's script has
	// run. (A DOM query action would mirror all 100,000 nodes into Go.)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+path)))
	require.True(t, eval[bool](t, ctx, `window.loopreplayReady === true`))
	require.Equal(t, 100, eval[int](t, ctx, `document.querySelectorAll("#rows .row").length`))
	require.Equal(t, 100*1000, eval[int](t, ctx, `document.querySelectorAll("#rows .c").length`))
	require.Equal(t, 10, eval[int](t, ctx, `document.querySelectorAll("#rows .c.k").length`))
	require.Empty(t, errs.all())
	st, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("page of 100 x 1,000 calls: %d bytes, rendered in %.0f ms", st.Size(), eval[float64](t, ctx, `window.loopreplayRenderMs`))
}

// testSessionList: a click on a heading sorts the session list by it, a
// second click the other way; a flagged session's link brings its
// timeline row, filled with its cells, to the fore.
func testSessionList(t *testing.T, ctx context.Context) {
	var errs consoleErrors
	errs.listen(t, ctx)
	sum, res := replayFiles(t, filepath.Join(seed000, "input.jsonl"), filepath.Join(seed000, "..", "client-gemini-cli-healthy", "input.jsonl"), claudeLogs)
	path := writePageFile(t, PageOf([]string{"a", "b", "c"}, sum, res))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+path)))
	require.True(t, eval[bool](t, ctx, `window.loopreplayReady === true`))
	verdicts := `[...document.querySelectorAll("#sessions tbody tr")].map(r => r.cells[2].textContent)`
	worstFirst := []string{"stuck", "stuck", "working", "working", "working", "working"}
	require.Equal(t, worstFirst, sortedStates(sum))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#sessions th:nth-child(3)`)))
	require.Equal(t, worstFirst, eval[[]string](t, ctx, verdicts))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#sessions th:nth-child(3)`)))
	slices.Reverse(worstFirst)
	require.Equal(t, worstFirst, eval[[]string](t, ctx, verdicts))
	require.Equal(t, "descending", eval[string](t, ctx, `document.querySelector("#sessions th:nth-child(3)").getAttribute("aria-sort")`))
	calls := `[...document.querySelectorAll("#sessions tbody tr")].map(r => Number(r.cells[5].textContent))`
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#sessions th:nth-child(6)`)))
	got := eval[[]int](t, ctx, calls)
	require.IsNonDecreasing(t, got)

	link := eval[string](t, ctx, `document.querySelector("#sessions tr.flagged a").getAttribute("href")`)
	session := eval[string](t, ctx, `document.querySelector("#sessions tr.flagged td.sid").dataset.v`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#sessions tr.flagged a`)))
	require.Equal(t, link, eval[string](t, ctx, `location.hash`))
	require.Equal(t, session, eval[string](t, ctx, `document.querySelector(".row:target").dataset.session`))
	require.Equal(t, sum.sessionCalls(session), eval[int](t, ctx, `document.querySelector(".row:target").querySelectorAll(".c").length`))
	require.Empty(t, errs.all())
}

// sortedStates are the summary's final states, worst first.
func sortedStates(sum *Summary) []string {
	var out []string
	for _, s := range sum.Sessions {
		out = append(out, s.FinalState)
	}
	sort.Slice(out, func(i, j int) bool { return stateRank[out[i]] < stateRank[out[j]] })
	return out
}

// largePage lays out sessions × calls synthetic calls: every tenth session
// loops from its middle and is killed five calls later.
func largePage(sessions, calls int) *Page {
	res := &Result{}
	t0 := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	for s := 0; s < sessions; s++ {
		key := fmt.Sprintf("session-%03d", s)
		loops := s%10 == 0
		for i := 0; i < calls; i++ {
			sig := uint64(s*calls + i + 1)
			if loops && i >= calls/2 {
				sig = 7
			}
			res.Calls = append(res.Calls, Call{
				Session: key, Client: "genai_semconv", Tool: []string{"read_file", "grep", "bash", "edit"}[i%4],
				SpanID: fmt.Sprintf("%016x", sig), Start: t0.Add(time.Duration(i) * 9 * time.Second),
				Signature: sig, Fingerprint: sig, Counted: true,
			})
		}
		if loops {
			for seq, tr := range []struct {
				to   string
				call int64
				kill bool
			}{{"stuck", int64(calls/2 + 2), false}, {"stuck", int64(calls/2 + 5), true}} {
				res.Events = append(res.Events, loopevent.Event{
					ID: fmt.Sprintf("ld_%s_%d", key, seq+1), Sequence: int64(seq + 1), Session: key,
					From: "working", To: tr.to, Reason: "frequent_identical", Period: 1, Repetitions: 5,
					CallIndex: tr.call, Kill: tr.kill, Explanation: "loop detected: same tool call x5 of last 10",
					Signatures: []string{"3f2a9c"}, Fingerprint: "77b1e0",
				})
			}
		}
	}
	sum := Summary{Message: "synthetic", Read: ReadSummary{ToolCalls: int64(sessions * calls)}}
	return PageOf([]string{"synthetic"}, &sum, res)
}

// BenchmarkPage reports the page size for 100 sessions of 1,000 calls.
func BenchmarkPage(b *testing.B) {
	p := largePage(100, 1000)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := WritePage(&buf, p); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "page-bytes")
}

// TestPageListsEverySessionWithItsVerdict: the page's session list has a
// row per session with its verdict and sort keys, and each flagged
// session (stuck at some call, killed or ending uncertain) links to its
// own timeline row, which is in the page; the others link nowhere.
func TestPageListsEverySessionWithItsVerdict(t *testing.T) {
	sum, res := replayFiles(t, filepath.Join(seed000, "input.jsonl"), filepath.Join(seed000, "..", "client-gemini-cli-healthy", "input.jsonl"), claudeLogs)
	// A name to escape, on a working session.
	require.Equal(t, "working", sum.Sessions[len(sum.Sessions)-1].FinalState)
	for i := range res.Calls {
		if res.Calls[i].Session == sum.Sessions[len(sum.Sessions)-1].Session {
			res.Calls[i].Session = `<b>"odd" & name</b>`
		}
	}
	*sum = Summarize(mustConfig(t), &Input{}, res)
	p := PageOf([]string{"a.jsonl"}, sum, res)
	var b bytes.Buffer
	require.NoError(t, WritePage(&b, p))
	page := b.String()

	rowRE := regexp.MustCompile(`<tr( class="flagged")?><td class="sid" data-v="([^"]*)">(.*?)</td><td data-v="[^"]*">[^<]*</td><td data-v="(\d+)"><span class="badge [a-z]-bg">([a-z]+)</span></td>` +
		`<td class="num" data-v="(\d+|1e15)">\d*</td><td class="num" data-v="(\d+)">\d+</td><td class="num" data-v="(\d+)">\d+</td>`)
	rows := rowRE.FindAllStringSubmatch(page, -1)
	require.Len(t, rows, len(sum.Sessions), "a row per session")
	require.Equal(t, len(sum.Sessions), strings.Count(page, `<tr><td class="sid"`)+strings.Count(page, `<tr class="flagged"><td class="sid"`))
	flagged := 0
	for i, r := range rows {
		s := sum.Sessions[i]
		require.Equal(t, html.EscapeString(s.Session), r[2])
		require.Equal(t, s.FinalState, r[5], s.Session)
		require.Equal(t, fmt.Sprint(stateRank[s.FinalState]), r[4], "the verdict sorts worst first")
		require.Equal(t, fmt.Sprint(s.Kills), r[7])
		require.Equal(t, fmt.Sprint(s.Calls), r[8])
		if s.StuckAtCall > 0 {
			require.Equal(t, fmt.Sprint(s.StuckAtCall), r[6])
		} else {
			require.Equal(t, "1e15", r[6], "no stuck call sorts last")
		}
		link := regexp.MustCompile(`^<a href="#(timeline-\d+)">(.*)</a>$`).FindStringSubmatch(r[3])
		if !Flagged(&s) {
			require.Empty(t, r[1])
			require.Nil(t, link, "%s is not flagged: no link", s.Session)
			require.Equal(t, html.EscapeString(s.Session), r[3])
			continue
		}
		flagged++
		require.NotEmpty(t, r[1])
		require.NotNil(t, link, "%s is flagged: a link to its timeline", s.Session)
		require.Equal(t, html.EscapeString(s.Session), link[2])
		// The target row is in the page, and is this session's.
		require.Contains(t, page, fmt.Sprintf(`<div class="row" id="%s" data-session="%s"`, link[1], html.EscapeString(s.Session)))
		require.Equal(t, 1, strings.Count(page, `id="`+link[1]+`"`))
	}
	require.Equal(t, 2, flagged, "the 1,972-call incident and the Claude Code loop")
	require.Less(t, flagged, len(rows), "a healthy session too")
	require.Contains(t, page, "&lt;b&gt;&#34;odd&#34; &amp; name&lt;/b&gt;")
	require.NotContains(t, page, `<b>"odd"`)

	// Every heading sorts, numbers as numbers; the script does it in the page.
	require.Equal(t, 8, len(regexp.MustCompile(`<th data-type="(num|text)"`).FindAllString(page, -1)))
	require.Contains(t, page, `th.addEventListener("click"`)
	require.Equal(t, 2, strings.Count(page, "<script"))
}

func mustConfig(t *testing.T) *loopdetect.Config {
	cfg, err := Config(nil)
	require.NoError(t, err)
	return cfg
}
