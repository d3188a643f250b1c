package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
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
