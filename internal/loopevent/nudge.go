package loopevent

import (
	"fmt"
	"strings"
)

// Nudge is the suggested text an agent framework can inject into its
// agent's context when the agent is warned: what it is repeating, in words
// a model acts on. reason is the transition's reason code, tools the
// cycle's tools in order, reps how often the cycle repeated.
func Nudge(reason string, tools []string, reps int64) string {
	tool := "the same tool"
	if len(tools) > 0 && tools[len(tools)-1] != "" {
		tool = tools[len(tools)-1]
	}
	times := ""
	if reps > 1 {
		times = fmt.Sprintf(" %d times", reps)
	}
	switch reason {
	case "frequent_identical", "unchanged_result":
		return fmt.Sprintf("You called %s with the same arguments%s and got the same result; try a different approach.", tool, times)
	case "periodic_loop":
		if len(tools) > 1 {
			return fmt.Sprintf("You repeated the sequence %s%s without the result changing; try a different approach.", strings.Join(tools, " → "), times)
		}
		return fmt.Sprintf("You called %s with the same arguments%s and got the same result; try a different approach.", tool, times)
	case "terminal_reread":
		return fmt.Sprintf("You read the final result of %s again; it will not change. Use it, or stop.", tool)
	case "non_retryable_error":
		return fmt.Sprintf("%s failed%s with an error that retrying will not fix; change the arguments or use a different tool.", tool, times)
	case "backoff_collapsed":
		return fmt.Sprintf("You are retrying %s faster than its backoff allows; wait before the next attempt, or give up on it.", tool)
	case "retry_exhausted":
		return fmt.Sprintf("%s has failed more often than its retry budget allows; stop retrying it and report the failure.", tool)
	case "backstop":
		return "This session has been running for a very long time; summarise what you have, and finish."
	default:
		return fmt.Sprintf("You appear to be repeating %s without progress; try a different approach.", tool)
	}
}

// Nudge returns the suggested nudge text for e (see Nudge).
func (e *Event) Nudge() string {
	return Nudge(e.Reason, e.CycleTools, e.Repetitions)
}
