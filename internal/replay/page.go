package replay

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"
)

//go:embed page.html
var pageTemplate string

// pageDataMarker is replaced by the page's JSON data.
const pageDataMarker = "/*LOOPREPLAY_DATA*/"

// Page is the data of loopreplay's timeline page: the summary and, per
// session, one entry per counted tool call in the engine's call order.
type Page struct {
	Title    string        `json:"title"`
	Inputs   []string      `json:"inputs"`
	Summary  *Summary      `json:"summary"`
	Sessions []PageSession `json:"sessions"`
}

// PageSession is one row of the page. Per-call fields are parallel arrays,
// so 1,000 calls cost a few kilobytes.
type PageSession struct {
	Session    string `json:"session"`
	Client     string `json:"client,omitempty"`
	FinalState string `json:"final"`
	Kills      int    `json:"kills"`
	// Tools names the session's tools; Tool[i] indexes it for call i+1.
	Tools []string `json:"tools"`
	Tool  []int    `json:"t"`
	// Action[i] numbers call i+1's action (tool and arguments) by first
	// appearance in the session, so equal numbers are equal calls;
	// Result[i] likewise for results (0: none recorded).
	Action []int `json:"a"`
	Result []int `json:"r"`
	// States holds one letter per call, the state after it: w working,
	// r retrying, a waiting (awaiting), u uncertain, s stuck.
	States string `json:"s"`
	// Flags holds one letter per call: n name-only, f failed, x both, - none.
	Flags string `json:"f"`
	// Offset[i] is call i+1's start in seconds after the session's first call.
	Offset []int64 `json:"o"`
	Start  string  `json:"start,omitempty"`
	// Transitions are marked on the call that triggered them.
	Transitions []PageTransition `json:"x"`
}

// PageTransition is a transition as the page shows it.
type PageTransition struct {
	Call        int      `json:"call"`
	From        string   `json:"from"`
	To          string   `json:"to"`
	Reason      string   `json:"reason"`
	Trigger     string   `json:"trigger,omitempty"`
	Period      int64    `json:"period"`
	Repetitions int64    `json:"reps"`
	CycleTools  []string `json:"cycle,omitempty"`
	Signatures  []string `json:"sigs,omitempty"`
	Fingerprint string   `json:"fp,omitempty"`
	FPSource    string   `json:"fp_source,omitempty"`
	Confidence  string   `json:"confidence,omitempty"`
	Kill        bool     `json:"kill"`
	DryRun      bool     `json:"dry_run,omitempty"`
	DelayCalls  int64    `json:"delay_calls,omitempty"`
	DelaySec    float64  `json:"delay_s,omitempty"`
	Explanation string   `json:"explanation"`
	ID          string   `json:"id"`
	SpanID      string   `json:"span_id,omitempty"`
}

var stateLetter = map[string]byte{"working": 'w', "retrying": 'r', "waiting": 'a', "uncertain": 'u', "stuck": 's'}

// stateRank orders rows: sessions with a kill first, then by how bad their
// final state is.
var stateRank = map[string]int{"stuck": 0, "uncertain": 1, "retrying": 2, "waiting": 3, "working": 4}

// StateRank is where a session ending in state sorts, on the page and in
// the summary: the worst state, stuck, is 0.
func StateRank(state string) int { return stateRank[state] }

// PageOf lays out a replay for the page.
func PageOf(inputs []string, sum *Summary, res *Result) *Page {
	return tallyOf(res, true).pageOf(inputs, sum)
}

func pageTitle(inputs []string) string {
	const shown = 3
	if len(inputs) > shown {
		return fmt.Sprintf("loopreplay: %s and %d more", strings.Join(inputs[:shown], ", "), len(inputs)-shown)
	}
	return "loopreplay: " + strings.Join(inputs, ", ")
}

func pageSession(key string, st *sessionTally) PageSession {
	// The engine numbers a session's calls in start-time order.
	calls := st.calls
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].start < calls[j].start })
	ps := PageSession{Session: key, FinalState: "working", Tools: []string{}}
	n := len(calls)
	ps.Tool, ps.Action, ps.Result, ps.Offset = make([]int, n), make([]int, n), make([]int, n), make([]int64, n)
	tools, acts, results := map[string]int{}, map[uint64]int{}, map[uint64]int{}
	flags := make([]byte, n)
	for i := range calls {
		c := &calls[i]
		if i == 0 {
			ps.Client = c.client
			ps.Start = time.Unix(0, c.start).UTC().Format("2006-01-02 15:04:05Z")
		}
		t, ok := tools[c.tool]
		if !ok {
			t = len(ps.Tools)
			tools[c.tool] = t
			ps.Tools = append(ps.Tools, c.tool)
		}
		ps.Tool[i] = t
		ps.Action[i] = number(acts, c.sig)
		if c.fp != 0 {
			ps.Result[i] = number(results, c.fp)
		}
		ps.Offset[i] = int64(time.Duration(c.start - calls[0].start).Seconds())
		switch {
		case c.nameOnly && c.failed:
			flags[i] = 'x'
		case c.nameOnly:
			flags[i] = 'n'
		case c.failed:
			flags[i] = 'f'
		default:
			flags[i] = '-'
		}
	}
	ps.Flags = string(flags)
	states := make([]byte, n)
	for i := range states {
		states[i] = 'w'
	}
	for i := range st.events {
		e := &st.events[i]
		call := int(min(max(e.CallIndex, 1), int64(max(n, 1))))
		ps.Transitions = append(ps.Transitions, PageTransition{
			Call: call, From: e.From, To: e.To, Reason: e.Reason, Trigger: e.Trigger,
			Period: e.Period, Repetitions: e.Repetitions, CycleTools: e.CycleTools,
			Signatures: e.Signatures, Fingerprint: e.Fingerprint, FPSource: e.FingerprintSource,
			Confidence: e.Confidence, Kill: e.Kill, DryRun: e.DryRun,
			DelayCalls: e.DelayCalls, DelaySec: e.DelaySeconds, Explanation: e.Explanation,
			ID: e.ID, SpanID: e.SpanID,
		})
		ps.FinalState = e.To
		if e.Kill {
			ps.Kills++
		}
		if ps.Client == "" {
			ps.Client = e.Client
		}
		// The state holds from the triggering call on.
		for i := call - 1; i < n; i++ {
			if i >= 0 {
				states[i] = stateLetter[e.To]
			}
		}
	}
	ps.States = string(states)
	return ps
}

func number(m map[uint64]int, d uint64) int {
	if v, ok := m[d]; ok {
		return v
	}
	m[d] = len(m) + 1
	return len(m)
}

// The page's session list and the timeline rows it links to are written
// into the page, so a flagged session's link has its target without
// script; the rows' cells are drawn from the data.
const (
	sessionTableMarker = "{{SESSION_TABLE}}"
	timelineRowsMarker = "{{TIMELINE_ROWS}}"
)

// Flagged says whether the page's list links a session to its timeline:
// it was stuck at some call, killed, or ended uncertain.
func Flagged(s *SessionSummary) bool {
	return s.StuckAtCall > 0 || s.Kills > 0 || s.FinalState == "stuck" || s.FinalState == "uncertain"
}

// TimelineID is the id of the i-th timeline row (p.Sessions[i]).
func TimelineID(i int) string { return fmt.Sprintf("timeline-%d", i) }

// sessionTable is the list of every session of the summary, a row each
// with its verdict; a flagged session's name links to its timeline.
func (p *Page) sessionTable() string {
	row := map[string]int{}
	for i := range p.Sessions {
		row[p.Sessions[i].Session] = i
	}
	var b strings.Builder
	b.WriteString(`<table id="sessions"><thead><tr><th data-type="text">session</th><th data-type="text">client</th>` +
		`<th data-type="num" title="worst first">verdict</th><th data-type="num">stuck at call</th><th data-type="num">kills</th>` +
		`<th data-type="num">calls</th><th data-type="num">detection delay (calls)</th><th data-type="text">file</th></tr></thead><tbody>` + "\n")
	if p.Summary == nil {
		b.WriteString("</tbody></table>")
		return b.String()
	}
	num := func(v int64) string {
		if v == 0 {
			return `<td class="num" data-v="1e15"></td>`
		}
		return fmt.Sprintf(`<td class="num" data-v="%d">%d</td>`, v, v)
	}
	for i := range p.Summary.Sessions {
		s := &p.Summary.Sessions[i]
		e := html.EscapeString
		name := e(s.Session)
		cls := ""
		if i, ok := row[s.Session]; ok && Flagged(s) {
			cls = ` class="flagged"`
			name = fmt.Sprintf(`<a href="#%s">%s</a>`, TimelineID(i), name)
		}
		fmt.Fprintf(&b, `<tr%s><td class="sid" data-v="%s">%s</td><td data-v="%s">%s</td><td data-v="%d"><span class="badge %c-bg">%s</span></td>`,
			cls, e(s.Session), name, e(s.Client), e(s.Client), stateRank[s.FinalState], stateLetterOr(s.FinalState), e(s.FinalState))
		b.WriteString(num(s.StuckAtCall))
		fmt.Fprintf(&b, `<td class="num" data-v="%d">%d</td><td class="num" data-v="%d">%d</td>`, s.Kills, s.Kills, s.Calls, s.Calls)
		b.WriteString(num(s.DelayCalls))
		fmt.Fprintf(&b, `<td class="file" data-v="%s">%s</td></tr>`+"\n", e(s.Transcript), e(s.Transcript))
	}
	b.WriteString("</tbody></table>")
	return b.String()
}

// stateLetterOr is a state's letter, w for an unknown one.
func stateLetterOr(state string) byte {
	if l, ok := stateLetter[state]; ok {
		return l
	}
	return 'w'
}

// timelineRows are the empty timeline rows, in p.Sessions' order, each
// with the id the list links to.
func (p *Page) timelineRows() string {
	var b strings.Builder
	for i := range p.Sessions {
		fmt.Fprintf(&b, `<div class="row" id="%s" data-session="%s" data-index="%d"></div>`,
			TimelineID(i), html.EscapeString(p.Sessions[i].Session), i)
	}
	return b.String()
}

// WritePage writes p as one self-contained HTML page: inline style and
// script, no external resources.
func WritePage(w io.Writer, p *Page) error {
	i := strings.Index(pageTemplate, pageDataMarker)
	if i < 0 {
		return fmt.Errorf("page template lacks its data marker")
	}
	head := strings.NewReplacer("{{TITLE}}", html.EscapeString(p.Title),
		sessionTableMarker, p.sessionTable(), timelineRowsMarker, p.timelineRows()).Replace(pageTemplate[:i])
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	// json.Encoder escapes <, > and &, so no "</script>" can end the block early.
	if err := json.NewEncoder(w).Encode(p); err != nil {
		return err
	}
	_, err := io.WriteString(w, pageTemplate[i+len(pageDataMarker):])
	return err
}
