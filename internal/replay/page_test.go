package replay_test

import (
	"bytes"
	"fmt"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
	"github.com/otelcol-loop/otelcol-loop/internal/replay/replaytest"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

// TestPageIsSelfContained: the page loads nothing from anywhere; session
// names and explanations cannot break out of its data block.
func TestPageIsSelfContained(t *testing.T) {
	sum, res := replaytest.Replay(t, filepath.Join(replaytest.Incident, "input.jsonl"))
	res.Calls[0].Session = `</script><script>alert(1)</script>`
	var b bytes.Buffer
	require.NoError(t, replay.WritePage(&b, replay.PageOf([]string{"<x>.jsonl"}, sum, res)))
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
	sum, res := replaytest.Replay(t, "testdata/scenarios/healthy-edit-test/input.jsonl", replaytest.ClaudeLogs)
	p := replay.PageOf([]string{"a", "b"}, sum, res)
	require.Len(t, p.Sessions, 2)
	require.Positive(t, p.Sessions[0].Kills)
	require.Equal(t, "stuck", p.Sessions[0].FinalState)
	require.Equal(t, "working", p.Sessions[1].FinalState)
	for i, s := range p.Sessions {
		require.Len(t, s.States, replaytest.SessionCalls(sum, s.Session), "row %d", i)
		require.Len(t, s.Tool, len(s.States))
	}
	// The claude session: uncertain from its 8th call, stuck from its 11th.
	require.Equal(t, strings.Repeat("w", 7)+strings.Repeat("u", 3)+strings.Repeat("s", 10), p.Sessions[0].States)
}

// BenchmarkPage reports the page size for 100 sessions of 1,000 calls.
func BenchmarkPage(b *testing.B) {
	p := replaytest.LargePage(100, 1000)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := replay.WritePage(&buf, p); err != nil {
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
	sum, res := replaytest.Replay(t, filepath.Join(replaytest.Incident, "input.jsonl"), "testdata/scenarios/client-gemini-cli-healthy/input.jsonl", replaytest.ClaudeLogs)
	// A name to escape, on a working session.
	require.Equal(t, "working", sum.Sessions[len(sum.Sessions)-1].FinalState)
	for i := range res.Calls {
		if res.Calls[i].Session == sum.Sessions[len(sum.Sessions)-1].Session {
			res.Calls[i].Session = `<b>"odd" & name</b>`
		}
	}
	*sum = replay.Summarize(mustConfig(t), &replay.Input{}, res)
	p := replay.PageOf([]string{"a.jsonl"}, sum, res)
	var b bytes.Buffer
	require.NoError(t, replay.WritePage(&b, p))
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
		require.Equal(t, fmt.Sprint(replay.StateRank(s.FinalState)), r[4], "the verdict sorts worst first")
		require.Equal(t, fmt.Sprint(s.Kills), r[7])
		require.Equal(t, fmt.Sprint(s.Calls), r[8])
		if s.StuckAtCall > 0 {
			require.Equal(t, fmt.Sprint(s.StuckAtCall), r[6])
		} else {
			require.Equal(t, "1e15", r[6], "no stuck call sorts last")
		}
		link := regexp.MustCompile(`^<a href="#(timeline-\d+)">(.*)</a>$`).FindStringSubmatch(r[3])
		if !replay.Flagged(&s) {
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
	cfg, err := replay.Config(nil)
	require.NoError(t, err)
	return cfg
}
