package replay

import (
	"sort"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

// tally folds a replay's tool calls and transitions, as they come, into
// what the summary and the page say of each session, so an audit of a
// thousand files keeps a line per session rather than every call: a few
// hundred bytes a session, plus, for the page, one small entry per call.
type tally struct {
	// page keeps each counted call's place on the timeline page.
	page        bool
	sessions    map[string]*sessionTally
	byClient    map[string]int64
	nameOnly    int64
	transitions map[string]int
	kills       int
	strs        interner
}

// sessionTally is one session's part of the tally.
type sessionTally struct {
	sum SessionSummary
	// calls and events are the page's: every counted call, in the order
	// read, and every transition.
	calls  []pageCall
	events []loopevent.Event
}

// pageCall is what the page shows of one call.
type pageCall struct {
	start            int64 // Unix nanoseconds
	tool, client     string
	sig, fp          uint64
	nameOnly, failed bool
}

func newTally(page bool) *tally {
	return &tally{page: page, sessions: map[string]*sessionTally{}, byClient: map[string]int64{}, transitions: map[string]int{}}
}

// session is key's tally, made on first sight; key need not be owned.
func (t *tally) session(key string) *sessionTally {
	s, ok := t.sessions[key]
	if !ok {
		key = t.strs.get(key)
		s = &sessionTally{sum: SessionSummary{Session: key, FinalState: "working"}}
		t.sessions[key] = s
	}
	return s
}

// call counts one tool call the processor read; its strings need not be
// owned.
func (t *tally) call(c *Call) {
	if _, ok := t.byClient[c.Client]; !ok {
		t.byClient[t.strs.get(c.Client)] = 0
	}
	t.byClient[c.Client]++
	if !c.Counted {
		return
	}
	s := t.session(c.Session)
	if s.sum.Client == "" {
		s.sum.Client = t.strs.get(c.Client)
	}
	s.sum.Calls++
	if c.NameOnly {
		t.nameOnly++
	}
	if t.page {
		s.calls = append(s.calls, pageCall{
			start: c.Start.UnixNano(), tool: t.strs.get(c.Tool), client: s.sum.Client,
			sig: c.Signature, fp: c.Fingerprint, nameOnly: c.NameOnly, failed: c.Failed,
		})
	}
}

// event counts one transition.
func (t *tally) event(e *loopevent.Event) {
	s := t.session(e.Session)
	s.sum.FinalState = e.To
	s.sum.Transitions++
	t.transitions[e.To]++
	if e.Kill {
		s.sum.Kills++
		t.kills++
	}
	if e.To == "stuck" && e.From != "stuck" && s.sum.DelayCalls == 0 {
		s.sum.DelayCalls, s.sum.DelaySeconds = e.DelayCalls, e.DelaySeconds
	}
	if e.To == "stuck" && s.sum.StuckAtCall == 0 {
		s.sum.StuckAtCall = e.CallIndex
	}
	if t.page {
		s.events = append(s.events, *e)
	}
}

// summary is the --summary of what in read and the processor counted.
func (t *tally) summary(cfg *loopdetect.Config, in *Input, counts Counts) Summary {
	sum := Summary{
		Sessions:    make([]SessionSummary, 0, len(t.sessions)),
		States:      map[string]int{},
		Transitions: map[string]int{},
		Kills:       t.kills,
		Read: ReadSummary{
			Spans: in.Spans, LogRecords: in.LogRecords, OtherSignalRequests: in.OtherSignals,
			Files: in.Formats, TranscriptCalls: in.TranscriptCalls,
			ToolCalls: counts.ToolCalls, ToolCallsByClient: map[string]int64{},
			Degraded: map[string]int64{}, Skipped: map[string]int64{},
			SkippedFiles: in.skipped,
		},
	}
	for k, v := range t.byClient {
		sum.Read.ToolCallsByClient[k] = v
	}
	for k, v := range t.transitions {
		sum.Transitions[k] = v
	}
	if t.nameOnly > 0 {
		sum.Read.Degraded["name_only"] = t.nameOnly
	}
	for key, s := range t.sessions {
		ss := s.sum
		ss.Transcript = in.SessionFiles[key]
		link := in.SessionParents[key]
		ss.ParentSession, ss.StartedBy = link.Session, link.ToolUseID
		sum.Sessions = append(sum.Sessions, ss)
		sum.States[ss.FinalState]++
	}
	sort.Slice(sum.Sessions, func(i, j int) bool { return sum.Sessions[i].Session < sum.Sessions[j].Session })

	d := counts.Degraded
	for _, k := range []string{"malformed", "oversized", "bad_evidence", "out_of_order"} {
		if d[k] > 0 {
			sum.Read.Degraded[k] = d[k]
		}
	}
	skipped := map[string]int64{
		"no_session_key":    d["no_session"],
		"repeated_delivery": d["duplicate"],
		"earlier_verdict":   d["foreign_verdict"],
		// The processor counts every span and record it looks at; what it
		// neither recognised nor set aside for a reason above matched no
		// tool-call name or attribute (or a skip list). Spans holding an
		// earlier replay's verdicts are among those looked at.
		"not_a_tool_call": max(counts.Items-counts.ToolCalls-d["no_session"]-in.VerdictSpans, 0),
	}
	for k, v := range skipped {
		if v > 0 {
			sum.Read.Skipped[k] = v
		}
	}
	for _, c := range in.Cleanings {
		sum.Read.ReadInPart = append(sum.Read.ReadInPart, FileNote{File: c.File, Note: joinNotes(c.Notes())})
	}
	sum.Message = message(cfg, &sum)
	return sum
}

// pageOf lays the tallied sessions out for the page (the tally must have
// been made with page set).
func (t *tally) pageOf(inputs []string, sum *Summary) *Page {
	p := &Page{Title: pageTitle(inputs), Inputs: inputs, Summary: sum}
	for key, s := range t.sessions {
		p.Sessions = append(p.Sessions, pageSession(key, s))
	}
	sort.Slice(p.Sessions, func(i, j int) bool {
		a, b := &p.Sessions[i], &p.Sessions[j]
		if (a.Kills > 0) != (b.Kills > 0) {
			return a.Kills > 0
		}
		if stateRank[a.FinalState] != stateRank[b.FinalState] {
			return stateRank[a.FinalState] < stateRank[b.FinalState]
		}
		return a.Session < b.Session
	})
	return p
}
