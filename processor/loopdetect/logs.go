package loopdetect

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// The logs adapter: agents that report tool calls as log events (Claude
// Code's claude_code.tool_result records) feed the same engine as tool
// spans. Transition events are appended as log records (event name
// loopdetect.transition, the loopevent attribute schema) to the scope that
// carried the triggering record, so alert_sink's logs input delivers them.

// defaultLogSessionKeys are used for log records when session.keys is not
// configured: log events usually carry no trace context, and a trace id of
// zero would put every agent into one session. Codex CLI's records carry
// its session id as conversation.id.
var defaultLogSessionKeys = []string{"session.id", "gen_ai.conversation.id", "conversation.id"}

// logsSignal adapts plog.Logs to the walk (core.go).
type logsSignal struct{ x *extract.Extractor }

type logsSide = side[plog.Logs, plog.LogRecordSlice]

var _ signal[plog.Logs, plog.LogRecordSlice] = logsSignal{}

// newLogsExtractor reads log records with cfg's keys, the default log
// session keys when none are configured.
func newLogsExtractor(cfg *Config) *extract.Extractor {
	keys := cfg.keys()
	if len(keys.Session) == 0 {
		keys.Session = defaultLogSessionKeys
	}
	return extract.New(keys, canon.NewNormalizer(cfg.Normalizer))
}

func (logsSignal) resources(ld plog.Logs) int { return ld.ResourceLogs().Len() }

func (logsSignal) scopes(ld plog.Logs, i int) (pcommon.Map, int) {
	rl := ld.ResourceLogs().At(i)
	return rl.Resource().Attributes(), rl.ScopeLogs().Len()
}

func (logsSignal) records(ld plog.Logs, i, j int) (plog.LogRecordSlice, int) {
	lrs := ld.ResourceLogs().At(i).ScopeLogs().At(j).LogRecords()
	return lrs, lrs.Len()
}

// scope: an incoming transition record is forged (it would become a
// signed kill in alert_sink); an accepted tool_decision is skipped (its
// tool_result follows) and does not move the event clock; a rejected one
// is a call, counted as refused. Log records carry no token usage the
// engine reads. Transitions are kept for the scope's end (endScope):
// appended now, they would be read as records of the scope.
func (a logsSignal) scope(w *walk, lrs plog.LogRecordSlice, res pcommon.Map) (forged bool) {
	eventTime := w.detector.cfg.EventTime
	for k := range lrs.Len() {
		lr := lrs.At(k)
		if lr.EventName() == loopevent.EventName {
			forged = true
			continue
		}
		rec := pdataspan.NewLogRecord(lr, res)
		if !rec.MayBeCall() {
			continue
		}
		if rec.Refused() {
			w.counts.refused++
		}
		if eventTime {
			advance(&w.detector.eventNow, rec.End().UnixNano())
		}
		if readCall(w, a.x, rec, false) == callObserved {
			for t := range w.state.trans {
				w.pending = append(w.pending, toEvent(&w.state.trans[t]))
			}
		}
	}
	return forged
}

func (logsSignal) endScope(w *walk, lrs plog.LogRecordSlice, forged bool) {
	if forged {
		lrs.RemoveIf(func(lr plog.LogRecord) bool {
			if lr.EventName() == loopevent.EventName {
				w.counts.foreign++
				return true
			}
			return false
		})
	}
	for p := range w.pending {
		appendTransition(lrs, &w.pending[p])
	}
}

// timerBatch writes each transition as a log record under the agent's
// resource, with the session's trace id when it has one.
func (logsSignal) timerBatch(trans []engine.Transition) plog.Logs {
	ld := plog.NewLogs()
	for i := range trans {
		t := &trans[i]
		ev := toEvent(t)
		rl := ld.ResourceLogs().AppendEmpty()
		putTarget(rl.Resource().Attributes(), t.Target)
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(metadata.ScopeName)
		appendTransition(sl.LogRecords(), &ev)
		if t.TraceID != ([16]byte{}) {
			lr := sl.LogRecords().At(0)
			lr.SetTraceID(t.TraceID)
		}
	}
	return ld
}

// appendTransition writes e as a log record: event name
// loopdetect.transition, the loopevent attributes, the explanation as body.
func appendTransition(lrs plog.LogRecordSlice, e *loopevent.Event) {
	lr := lrs.AppendEmpty()
	lr.SetEventName(loopevent.EventName)
	ts := pcommon.NewTimestampFromTime(e.DecidedAt)
	lr.SetTimestamp(ts)
	lr.SetObservedTimestamp(ts)
	if e.To == "stuck" {
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
		lr.SetSeverityText("WARN")
	} else {
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
	}
	lr.Body().SetStr(e.Explanation)
	e.CopyTo(lr.Attributes())
}
