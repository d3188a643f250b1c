package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The implicit lease: a coding agent that polls a CI run, a rollout or a
// background job with a deliberate wait (`sleep 30 && gh run view 4242
// --json status`) is waiting, though a CLI agent cannot declare a lease
// attribute. A poll — a call that itself waits, or a call of a background
// job's status tool (WaitReader) — whose result reports the job pending
// is granted a lease the engine sets itself, with the rule of leases: an
// owner (the polled job, read from the call) and a deadline (MaxDuration
// from the job's first poll, or MaxPolls polls, whichever comes first).
// The lease rule (rule_lease.go) reads it: a repetition whose newest call
// is a covered poll is waiting. When the lease runs out the repetition is
// read as usual — stuck, and killed as the kill policy says.
//
// What stays a loop: a re-read without a wait in the call (the async-task
// incident's cached poll), a poll whose result is done or unrecognised
// (free text is never a lease), a job whose lease ran out (never renewed
// for the same job), and any other call between the polls that repeats.

// ImplicitWaitConfig bounds implicit wait leases (implicit_wait).
type ImplicitWaitConfig struct {
	// Enabled grants implicit leases to polls. Default true.
	Enabled bool `mapstructure:"enabled"`
	// MaxDuration is how long one job's implicit lease lasts from its
	// first poll. Default 30m.
	MaxDuration time.Duration `mapstructure:"max_duration"`
	// MaxPolls is how many polls one job's implicit lease covers. Default
	// 60.
	MaxPolls int `mapstructure:"max_polls"`
	// MaxRenewals is how many implicit leases a session may start once one
	// has run out. Default 3.
	MaxRenewals int `mapstructure:"max_renewals"`
	// CommandTools are the shell tools whose command line is read for a
	// wait, each with the argument that holds it (the arguments as text,
	// when they are no JSON). Default: Bash (Claude Code),
	// run_shell_command (Gemini CLI), shell, bash, execute_bash,
	// execute_command, run_terminal_cmd, run_in_terminal, terminal
	// (command), exec_command (cmd; Codex CLI).
	CommandTools []CommandTool `mapstructure:"command_tools"`
	// StatusTools are the tools that report a background job's state, each
	// with the argument that names the job. Default: TaskOutput (task_id)
	// and BashOutput (bash_id) of Claude Code, read_background_output (pid)
	// of Gemini CLI.
	StatusTools []StatusTool `mapstructure:"status_tools"`
	// PendingStates are the status values of a job that has not finished.
	// Default: queued, pending, in_progress, running, waiting, requested,
	// starting, scheduled, not_ready, progressing, provisioning, creating,
	// deploying, building, processing, initializing.
	PendingStates []string `mapstructure:"pending_states"`
	// DoneStates are the status values of a job that has, whatever its
	// outcome. Default: completed, complete, success, succeeded, failure,
	// failed, error, cancelled, canceled, skipped, timed_out, done,
	// finished, killed, stopped, exited, action_required, neutral.
	DoneStates []string `mapstructure:"done_states"`
	// Tools overrides max_duration and max_polls, or turns implicit leases
	// off, per tool name. Default none.
	Tools map[string]ImplicitWaitOverride `mapstructure:"tools"`
}

// CommandTool is a shell tool.
type CommandTool struct {
	// Tool is the tool's name.
	Tool string `mapstructure:"tool"`
	// CommandKey is the argument that holds the command line (a string,
	// or its words as an array).
	CommandKey string `mapstructure:"command_key"`
}

func (c CommandTool) String() string { return c.Tool + " (" + c.CommandKey + ")" }

// StatusTool is a tool that reports a background job's state.
type StatusTool struct {
	// Tool is the tool's name.
	Tool string `mapstructure:"tool"`
	// IDKey is the argument that names the job.
	IDKey string `mapstructure:"id_key"`
}

func (s StatusTool) String() string { return s.Tool + " (" + s.IDKey + ")" }

// ImplicitWaitOverride is one tool's implicit lease settings.
type ImplicitWaitOverride struct {
	// Enabled, when false, grants the tool's polls no implicit lease.
	Enabled *bool `mapstructure:"enabled"`
	// MaxDuration replaces implicit_wait.max_duration (0: kept).
	MaxDuration time.Duration `mapstructure:"max_duration"`
	// MaxPolls replaces implicit_wait.max_polls (0: kept).
	MaxPolls int `mapstructure:"max_polls"`
}

func defaultImplicitWait() ImplicitWaitConfig {
	return ImplicitWaitConfig{
		Enabled:     true,
		MaxDuration: 30 * time.Minute,
		MaxPolls:    60,
		MaxRenewals: 3,
		CommandTools: []CommandTool{
			{"Bash", "command"}, {"run_shell_command", "command"}, {"shell", "command"}, {"exec_command", "cmd"},
			{"bash", "command"}, {"execute_bash", "command"}, {"execute_command", "command"},
			{"run_terminal_cmd", "command"}, {"run_in_terminal", "command"}, {"terminal", "command"},
		},
		StatusTools: []StatusTool{
			{Tool: "TaskOutput", IDKey: "task_id"},
			{Tool: "BashOutput", IDKey: "bash_id"},
			{Tool: "read_background_output", IDKey: "pid"},
		},
		PendingStates: []string{
			"queued", "pending", "in_progress", "running", "waiting", "requested", "starting", "scheduled",
			"not_ready", "progressing", "provisioning", "creating", "deploying", "building", "processing", "initializing",
		},
		DoneStates: []string{
			"completed", "complete", "success", "succeeded", "failure", "failed", "error", "cancelled", "canceled",
			"skipped", "timed_out", "done", "finished", "killed", "stopped", "exited", "action_required", "neutral",
		},
	}
}

// DefaultImplicitWait returns implicit_wait's defaults.
func DefaultImplicitWait() ImplicitWaitConfig { return defaultImplicitWait() }

func (c ImplicitWaitConfig) check() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.MaxDuration <= 0 {
		errs = append(errs, fmt.Errorf("implicit_wait.max_duration must be > 0, got %s", c.MaxDuration))
	}
	if c.MaxPolls < 1 {
		errs = append(errs, fmt.Errorf("implicit_wait.max_polls must be ≥ 1, got %d", c.MaxPolls))
	}
	if c.MaxRenewals < 0 {
		errs = append(errs, fmt.Errorf("implicit_wait.max_renewals must be ≥ 0, got %d", c.MaxRenewals))
	}
	for i, ct := range c.CommandTools {
		if ct.Tool == "" || ct.CommandKey == "" {
			errs = append(errs, fmt.Errorf("implicit_wait.command_tools[%d]: tool and command_key are required", i))
		}
	}
	for i, st := range c.StatusTools {
		if st.Tool == "" || st.IDKey == "" {
			errs = append(errs, fmt.Errorf("implicit_wait.status_tools[%d]: tool and id_key are required", i))
		}
	}
	for tool, o := range c.Tools {
		if o.MaxDuration < 0 {
			errs = append(errs, fmt.Errorf("implicit_wait.tools.%s.max_duration must not be negative, got %s", tool, o.MaxDuration))
		}
		if o.MaxPolls < 0 {
			errs = append(errs, fmt.Errorf("implicit_wait.tools.%s.max_polls must not be negative, got %d", tool, o.MaxPolls))
		}
	}
	return errors.Join(errs...)
}

// limits are a tool's lease bounds, and false when its polls get none.
func (c *ImplicitWaitConfig) limits(tool string) (time.Duration, int, bool) {
	d, n := c.MaxDuration, c.MaxPolls
	if o, ok := c.Tools[tool]; ok {
		if o.Enabled != nil && !*o.Enabled {
			return 0, 0, false
		}
		if o.MaxDuration > 0 {
			d = o.MaxDuration
		}
		if o.MaxPolls > 0 {
			n = o.MaxPolls
		}
	}
	return d, n, true
}

// waitOwners is how many jobs a session may wait on at once: two CI runs
// polled in turn are both waiting.
const waitOwners = 2

// implicitWaits is a session's implicit leases, allocated at its first
// poll.
type implicitWaits struct {
	slots [waitOwners]waitSlot
	// renewals counts leases started after one ran out; spent, that one
	// has.
	renewals int32
	spent    bool
	// coveredAt is the call count (session.total) of the newest call when
	// it was a covered poll, of slot covered; spentAt the call count at
	// which a lease ran out on a poll.
	coveredAt, spentAt int64
	covered, spentSlot uint8
	// notedAt is the call count of the poll last noted: a twin of the same
	// call, noted again, is no second poll.
	notedAt int64
	// excusedThrough is the call count of the newest covered poll: the
	// calls up to it count toward no frequent-identical run while its
	// lease runs (until excusedDeadline) and after its job reported done
	// (excusedDone), so a wait that ends, or that the agent leaves for
	// other work, is not read as the loop it resembled. A lease that runs
	// out withdraws the excuse.
	excusedThrough, excusedDeadline int64
	excusedOwner                    Digest
	excusedDone                     bool
}

type slotState uint8

const (
	slotFree slotState = iota
	slotRunning
	slotSpent
)

// waitSlot is one job's implicit lease.
type waitSlot struct {
	owner    Digest
	label    string
	first    int64 // engine time of the first poll
	deadline int64
	polls    int32
	maxPolls int32
	state    slotState
}

// waitResult says what noting a poll did.
type waitResult uint8

const (
	waitIgnored waitResult = iota
	waitCovered
	waitRejected
)

// noteWait records a poll's evidence at engine time now: a pending poll is
// covered by its job's lease (started at the job's first poll), a done one
// ends it. A job whose lease ran out is not covered again; a new job is
// refused when both slots hold running leases, or, once a lease ran out,
// after max_renewals new ones.
func (s *session) noteWait(w *Wait, tool string, cfg *ImplicitWaitConfig, now int64) waitResult {
	maxDur, maxPolls, on := cfg.limits(tool)
	if !on || (w.State != JobPending && (s.extra == nil || s.extra.wait == nil)) {
		return waitIgnored
	}
	x := s.extras()
	if x.wait == nil {
		x.wait = &implicitWaits{}
	}
	iw := x.wait
	i := iw.slotOf(w.Owner)
	switch w.State {
	case JobDone:
		if i >= 0 {
			if iw.slots[i].state == slotRunning && iw.excusedOwner == w.Owner {
				iw.excusedDone = true
			}
			iw.slots[i] = waitSlot{} // the job is over; a later wait on it is a new one
		}
		return waitIgnored
	case JobUnknown:
		return waitIgnored
	}
	twin := iw.notedAt == s.total
	iw.notedAt = s.total
	if i >= 0 {
		sl := &iw.slots[i]
		if sl.state == slotSpent {
			return waitRejected
		}
		if !twin {
			sl.polls++
		}
		if now >= sl.deadline || sl.polls > sl.maxPolls {
			sl.state, iw.spent, iw.spentAt, iw.spentSlot = slotSpent, true, s.total, uint8(i)
			iw.excusedThrough = 0
			return waitRejected
		}
		iw.cover(i, s.total)
		return waitCovered
	}
	i, renewal := iw.freeSlot()
	if i < 0 {
		return waitRejected
	}
	if renewal {
		if int(iw.renewals) >= cfg.MaxRenewals {
			return waitRejected
		}
		iw.renewals++
	}
	iw.slots[i] = waitSlot{
		owner: w.Owner, label: strings.Clone(truncate(w.Label, maxKept)), first: now,
		deadline: now + int64(maxDur), polls: 1, maxPolls: int32(min(maxPolls, 1<<30)), state: slotRunning,
	}
	iw.cover(i, s.total)
	return waitCovered
}

// cover records that the call numbered total was a poll slot i covered.
func (iw *implicitWaits) cover(i int, total int64) {
	sl := &iw.slots[i]
	iw.covered, iw.coveredAt = uint8(i), total
	iw.excusedThrough, iw.excusedDeadline, iw.excusedOwner, iw.excusedDone = total, sl.deadline, sl.owner, false
}

// excusedFrom is the position, in a history of n calls, of the first call
// after the polls an implicit lease excuses at now (0 when none is).
func (s *session) excusedFrom(n int, now int64) int {
	if s.extra == nil || s.extra.wait == nil {
		return 0
	}
	iw := s.extra.wait
	if iw.excusedThrough == 0 || (!iw.excusedDone && now >= iw.excusedDeadline) {
		return 0
	}
	return max(n-int(s.total-iw.excusedThrough), 0)
}

func (iw *implicitWaits) slotOf(owner Digest) int {
	for i := range iw.slots {
		if iw.slots[i].state != slotFree && iw.slots[i].owner == owner {
			return i
		}
	}
	return -1
}

// freeSlot is a slot for a new job: a free one, else one whose lease ran
// out (a renewal, as is any new lease once one has run out); -1 when both
// hold running leases.
func (iw *implicitWaits) freeSlot() (int, bool) {
	for i := range iw.slots {
		if iw.slots[i].state == slotFree {
			return i, iw.spent
		}
	}
	for i := range iw.slots {
		if iw.slots[i].state == slotSpent {
			return i, true
		}
	}
	return -1, false
}

// waitCovered is the implicit lease covering the newest call at now: the
// call was a poll its job's lease covered, and the lease's deadline is
// still ahead. Nil for most sessions, at one load.
func (s *session) waitCovered(now int64) *waitSlot {
	if s.extra == nil || s.extra.wait == nil || s.extra.wait.coveredAt != s.total {
		return nil
	}
	sl := &s.extra.wait.slots[s.extra.wait.covered]
	if sl.state != slotRunning || sl.deadline <= now {
		return nil
	}
	return sl
}

// waitHeld reports an implicit lease that covered the newest call, its
// expiry not yet judged (a tick after its deadline judges it).
func (s *session) waitHeld() bool {
	return s.extra != nil && s.extra.wait != nil && s.extra.wait.coveredAt == s.total && s.extra.wait.slots[s.extra.wait.covered].state == slotRunning
}

// explainImplicit writes the waiting verdict of an implicit lease.
func explainImplicit(b *strings.Builder, sl *waitSlot) {
	fmt.Fprintf(b, "waiting: polling %q, which reports its job pending (implicit lease: poll %d of %d, until %s)",
		sl.label, sl.polls, sl.maxPolls, time.Unix(0, sl.deadline).UTC().Format(time.RFC3339))
}

// explainRunOut writes why a wait ended, before the verdict that follows
// it, when a tick found the newest call's implicit lease past its deadline
// or the newest call ran its lease out; false when neither did.
func explainRunOut(b *strings.Builder, s *session, trig Trigger, now int64) bool {
	if s.extra == nil || s.extra.wait == nil {
		return false
	}
	iw := s.extra.wait
	switch {
	case trig == TriggerTick && iw.coveredAt == s.total:
		sl := &iw.slots[iw.covered]
		fmt.Fprintf(b, "implicit wait on %q expired (%s after its first poll, %d polls); ", sl.label, shortDur(time.Duration(sl.deadline-sl.first)), sl.polls)
		return true
	case trig == TriggerCall && iw.spentAt == s.total && iw.spentAt > 0:
		sl := &iw.slots[iw.spentSlot]
		fmt.Fprintf(b, "implicit wait on %q ran out (%d polls covered, %s since its first poll); ", sl.label, sl.polls-1, shortDur(time.Duration(now-sl.first).Round(time.Second)))
		return true
	}
	return false
}

// shortDur is d as a config spells it: 30m, 1h30m, 45s.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
