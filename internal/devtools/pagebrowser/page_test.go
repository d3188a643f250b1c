package pagebrowser_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
	"github.com/otelcol-loop/otelcol-loop/internal/replay/replaytest"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of the 1,972-call incident's replay page to this PNG file")

const browserHint = "install Debian's chromium (make chromium) or set LOOPREPLAY_CHROMIUM"

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
	t.Run("the 1,972-call incident and a Claude Code session", func(t *testing.T) { testIncidentPage(t, tab(t, ctx)) })
	t.Run("100 sessions of 1,000 calls", func(t *testing.T) { testLargePage(t, tab(t, ctx)) })
	t.Run("screenshot of the 1,972-call incident", func(t *testing.T) { testIncidentScreenshot(t, tab(t, ctx)) })
	t.Run("the session list sorts and links to timelines", func(t *testing.T) { testSessionList(t, tab(t, ctx)) })
}

func tab(t *testing.T, browser context.Context) context.Context {
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	return ctx
}

// testIncidentPage: the 1,972-call incident's replay, with a Claude Code session beside
// it, loads without console errors, shows a row per session and a cell
// per call, and marks the kill on the call the golden names; clicking it
// shows the explanation.
func testIncidentPage(t *testing.T, ctx context.Context) {
	var errs consoleErrors
	errs.listen(t, ctx)

	kill := replaytest.GoldenKill(t, replaytest.Incident)
	sum, res := replaytest.Replay(t, filepath.Join(replaytest.Incident, "input.jsonl"), replaytest.ClaudeLogs)
	path := replaytest.WritePage(t, replay.PageOf([]string{"s000-bash-loop/input.jsonl", "claude-code/logs.jsonl"}, sum, res))
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

// testIncidentScreenshot: the incident's page, its kill clicked, fits the
// README's picture with the kill cell and its explanation in view. With
// -screenshot FILE (make screenshot) the picture is written there.
func testIncidentScreenshot(t *testing.T, ctx context.Context) {
	kill := replaytest.GoldenKill(t, replaytest.Incident)
	sum, res := replaytest.Replay(t, filepath.Join(replaytest.Incident, "input.jsonl"))
	path := replaytest.WritePage(t, replay.PageOf([]string{"testdata/scenarios/s000-bash-loop/input.jsonl"}, sum, res))
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
		out = filepath.Join(t.TempDir(), "incident.png")
	}
	require.NoError(t, os.WriteFile(out, shot, 0o644))
}

// testLargePage: 100 sessions of 1,000 calls render in full (100,000
// cells) without errors.
func testLargePage(t *testing.T, ctx context.Context) {
	var errs consoleErrors
	errs.listen(t, ctx)
	p := replaytest.LargePage(100, 1000)
	path := replaytest.WritePage(t, p)
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
	sum, res := replaytest.Replay(t, filepath.Join(replaytest.Incident, "input.jsonl"), "testdata/scenarios/client-gemini-cli-healthy/input.jsonl", replaytest.ClaudeLogs)
	path := replaytest.WritePage(t, replay.PageOf([]string{"a", "b", "c"}, sum, res))
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
	require.Equal(t, replaytest.SessionCalls(sum, session), eval[int](t, ctx, `document.querySelector(".row:target").querySelectorAll(".c").length`))
	require.Empty(t, errs.all())
}

// sortedStates are the summary's final states, worst first.
func sortedStates(sum *replay.Summary) []string {
	var out []string
	for _, s := range sum.Sessions {
		out = append(out, s.FinalState)
	}
	sort.Slice(out, func(i, j int) bool { return replay.StateRank(out[i]) < replay.StateRank(out[j]) })
	return out
}
