package engine

// reasonDocs says, per reason code, the state it explains and when the
// engine gives it: the reason table of docs/design.md is generated from it
// (processor/loopdetect's TestDesignReasonTable), so the two cannot drift.
var reasonDocs = [...]struct {
	state State
	when  string
}{
	ReasonNoLoop:              {StateWorking, "nothing loop-shaped in the history"},
	ReasonProgress:            {StateWorking, "loop-shaped, but the fingerprint changed"},
	ReasonLease:               {StateWaiting, "a valid wait lease covers the repetition"},
	ReasonImplicitLease:       {StateWaiting, "the repetition's newest call is a poll that itself waits (`sleep 30 && gh run view …`, `kubectl rollout status`, a background job's status tool) and its result reports the job pending (`in_progress`, `queued`, a rollout \"Waiting for\", HTTP 202…): an implicit lease, 30 min from the job's first poll or 60 polls"},
	ReasonRetryPolicy:         {StateRetrying, "retryable failures inside the policy"},
	ReasonTerminalReread:      {StateStuck, "the same read, in a row, returns the same terminal result (`state`/`status` = complete, succeeded, done, failed… at the top of the result): an agent re-read a completed async task's result again and again; at once, never delayed by hysteresis"},
	ReasonFrequentIdentical:   {StateStuck, "≥ 5 of the last 10 calls have the same signature and the calls between them bring nothing new: no new action, no new result (the 1,972-call incident; a fix-and-test cycle, a new edit before each run of the same test, is progress; the first B of A-B-A-B only starts the cycle); holds with no results recorded"},
	ReasonUnchangedResult:     {StateStuck, "the same call returned an identical normalized result twice in a row (an agent polling a cached async result that never changed; the period-1 case of the periodic rule on result fingerprints)"},
	ReasonPeriodicLoop:        {StateStuck, "a cycle of period 1..3 repeated ≥ 2 times with an unchanged fingerprint (a search/read oscillation over an unchanged brief)"},
	ReasonLongCycle:           {StateStuck, "a run of ≥ 4 calls, each repeating an (action, result) pair of the last 24 calls, that covers a whole cycle: a 4-step polling cycle with identical results, a paging sweep that wraps around and re-reads the same pages"},
	ReasonCycleWithoutResults: {StateStuck, "a cycle of up to 5 calls with arguments but no results, repeated 5 times (Gemini CLI's bound); name-only calls stay uncertain"},
	ReasonFailureStreak:       {StateStuck, "one tool failing 6 times in a row with one non-retryable error class, whatever its arguments, with no successful new call between (twelve reads of twelve missing paths)"},
	ReasonUnknownTool:         {StateStuck, "3 calls in a row of a tool that does not exist (\"is not a valid tool\", NoSuchToolError, \"Unknown tool\"); at once, never delayed by hysteresis"},
	ReasonNonRetryableError:   {StateStuck, "identical calls failing with a non-retryable error; the explanation quotes the masked error text"},
	ReasonBackoffCollapsed:    {StateStuck, "retries faster than the policy's backoff"},
	ReasonRetryExhausted:      {StateStuck, "more attempts than the policy allows"},
	ReasonBackstop:            {StateStuck, "the session has been active longer than 2 h (the five-hour incident's second line of defence), checked on ticks too"},
	ReasonMissingFingerprint:  {StateUncertain, "loop-shaped, no progress fingerprint"},
	ReasonNameOnly:            {StateUncertain, "loop-shaped, but arguments were not recorded"},
}

// ReasonDoc is one row of the reason table: a reason code, the state it
// explains and when the engine gives it.
type ReasonDoc struct {
	Reason Reason
	State  State
	When   string
}

// ReasonDocs returns every reason code with its state and meaning, working
// first, then waiting, retrying, stuck and uncertain.
func ReasonDocs() []ReasonDoc {
	var out []ReasonDoc
	for _, st := range [...]State{StateWorking, StateWaiting, StateRetrying, StateStuck, StateUncertain} {
		for r, d := range reasonDocs {
			if d.state == st && d.when != "" {
				out = append(out, ReasonDoc{Reason: Reason(r), State: st, When: d.when})
			}
		}
	}
	return out
}
