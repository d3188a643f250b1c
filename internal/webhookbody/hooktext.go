package webhookbody

// The hook's words to the agent. loopsupervisor's hook begins every nudge
// it passes to the model with NudgeMarker and every reason it blocks a call
// for with BlockedMarker; the collector's extractor leaves a nudge that an
// agent CLI put into a call's output (OpenCode's plugin appends it there)
// out of the result it digests, and a result carrying BlockedMarker is a
// call that never ran.
const (
	NudgeMarker   = "loopsupervisor: the loop detector found this session repeating itself."
	BlockedMarker = "Blocked by loopsupervisor"
)
