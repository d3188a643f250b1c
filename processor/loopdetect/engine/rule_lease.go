package engine

import (
	"fmt"
	"strings"
	"time"
)

// leaseRule: a repetition covered by a valid wait lease (an owner and a
// deadline still ahead) is waiting, not a loop. Free text is not a lease:
// without both the agent could hide any loop behind "waiting". Renewals
// and owner changes are bounded when the lease is noted (session.noteLease).
type leaseRule struct{}

func (leaseRule) evaluate(w *window, v *verdict) bool {
	// The lease first: it is one load, the repetition three analyses. An
	// implicit lease (rule_implicit_wait.go) covers only the poll it was
	// granted for: the newest call.
	reason := ReasonLease
	if !w.session.leaseValid(w.now) {
		if w.session.waitCovered(w.now) == nil {
			return false
		}
		reason = ReasonImplicitLease
	}
	if !w.repetition() {
		return false
	}
	sh, _ := w.periodic()
	*v = verdict{state: StateWaiting, reason: reason, loopStart: -1, window: len(w.history), period: sh.period, reps: sh.sigRun / max(sh.period, 1)}
	return true
}

func (leaseRule) explain(b *strings.Builder, w *window, v verdict) {
	if v.reason == ReasonImplicitLease {
		if sl := w.session.waitCovered(w.now); sl != nil {
			explainImplicit(b, sl)
		}
		return
	}
	ls := &w.session.extra.lease
	fmt.Fprintf(b, "waiting: lease held by %q until %s", ls.owner, time.Unix(0, ls.deadline).UTC().Format(time.RFC3339))
	if ls.reason != "" {
		fmt.Fprintf(b, " (%s)", ls.reason)
	}
}

// LeaseConfig bounds wait leases (lease).
type LeaseConfig struct {
	// MaxRenewals is how many later deadlines are honoured. Default 3.
	MaxRenewals int `mapstructure:"max_renewals"`
}

func defaultLease() LeaseConfig { return LeaseConfig{MaxRenewals: 3} }

func (c LeaseConfig) check() error {
	if c.MaxRenewals < 0 {
		return fmt.Errorf("lease.max_renewals must be ≥ 0, got %d", c.MaxRenewals)
	}
	return nil
}
