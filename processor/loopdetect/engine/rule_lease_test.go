package engine

import (
	"testing"
	"time"
)

// TestLeaseRule: a repetition covered by a valid lease (an owner and a
// deadline still ahead) is waiting, not a loop. Free text is not a lease: a
// lease missing either half, or already past its deadline, covers nothing,
// and the same polls are stuck as they would be without it.
func TestLeaseRule(t *testing.T) {
	polls := func(n int, lease func(i int) Lease) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				c := b.call(time.Duration(i)*time.Second, "check_ci", `{"run":4242}`, `{"status":"in_progress"}`)
				c.Lease = lease(i)
				return c
			})
		}
	}
	same := func(l Lease) func(int) Lease { return func(int) Lease { return l } }
	hour := t0.Add(time.Hour)
	tests := []struct {
		name    string
		calls   func(b *callBuilder) []*ToolCall
		to      State
		at      int64
		reason  Reason
		explain string
	}{
		{"an owner and a deadline ahead: waiting at the 2nd poll", polls(3, same(Lease{Owner: "ci", Deadline: hour, Reason: "run 4242"})),
			StateWaiting, 2, ReasonLease, `waiting: lease held by "ci" until 2026-01-01T01:00:00Z (run 4242)`},
		{"an owner and a deadline ahead: never stuck", polls(8, same(Lease{Owner: "ci", Deadline: hour})),
			StateStuck, 0, ReasonNone, ""},
		{"no owner: no lease, stuck", polls(2, same(Lease{Deadline: hour, Reason: "waiting for CI"})),
			StateStuck, 2, ReasonUnchangedResult, ""},
		{"no deadline: no lease, stuck", polls(2, same(Lease{Owner: "ci", Reason: "waiting for CI"})),
			StateStuck, 2, ReasonUnchangedResult, ""},
		{"a deadline already past: stuck", polls(2, same(Lease{Owner: "ci", Deadline: t0.Add(-time.Second)})),
			StateStuck, 2, ReasonUnchangedResult, ""},
		{"a lease that runs out while the polls go on: stuck after it", polls(5, same(Lease{Owner: "ci", Deadline: t0.Add(2500 * time.Millisecond)})),
			StateStuck, 4, ReasonUnchangedResult, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := observeAll(mustEngine(t, nil), tt.calls(newBuilder("s")))
			checkFirstTransition(t, tr, tt.to, tt.at, tt.reason, tt.explain)
		})
	}
}

// Renewals past lease.max_renewals are refused and counted: an agent
// cannot push its deadline out for ever.
func TestLeaseRenewalsAreBounded(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.Lease.MaxRenewals = 1 })
	b := newBuilder("s")
	calls := nCalls(3, func(i int) *ToolCall {
		c := b.call(time.Duration(i)*time.Second, "check_ci", `{"run":4242}`, `{"status":"in_progress"}`)
		c.Lease = Lease{Owner: "ci", Deadline: t0.Add(time.Duration(i+1) * time.Hour)}
		return c
	})
	observeAll(e, calls)
	if got := e.Stats().LeasesRejected.Load(); got != 1 {
		t.Fatalf("rejected %d leases, want 1 (the 2nd renewal)", got)
	}
}

func TestLeaseOwnerMayChangeOnlyAfterExpiry(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("s")
	withLease := func(at time.Duration, owner string, deadline time.Duration) *ToolCall {
		c := b.call(at, "check", `{"j":1}`, `{"ok":false}`)
		c.Lease = Lease{Owner: owner, Deadline: t0.Add(deadline)}
		return c
	}
	var out []Transition
	out = observeAll(e, []*ToolCall{withLease(0, "ci", 30*time.Second), withLease(time.Second, "ci", 30*time.Second)})
	if len(out) != 1 || out[0].To != StateWaiting {
		t.Fatalf("want waiting on ci: %+v", out)
	}
	if rej := e.Stats().LeasesRejected.Load(); rej != 0 {
		t.Fatalf("rejected %d", rej)
	}
	// While ci's lease runs, a reviewer cannot take the wait over.
	observeAll(e, []*ToolCall{withLease(2*time.Second, "reviewer", time.Hour)})
	if e.Stats().LeasesRejected.Load() != 1 {
		t.Fatal("owner change during a running lease must be rejected")
	}
	// After it expired, a new owner's lease is honoured (as a renewal).
	out = observeAll(e, []*ToolCall{withLease(40*time.Second, "reviewer", time.Hour)})
	if st, _, _ := e.Session("s"); st != StateWaiting {
		t.Fatalf("state %v after the reviewer's lease, transitions %+v", st, out)
	}
}

func TestWaitingSessionOutlivesIdleTimeoutUntilItsLeaseIsJudged(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.IdleTimeout = time.Minute })
	b := newBuilder("s")
	var calls []*ToolCall
	for i := 0; i < 2; i++ {
		c := b.call(time.Duration(i)*time.Second, "check", `{"j":1}`, `{"ok":false}`)
		c.Lease = Lease{Owner: "ci", Deadline: t0.Add(time.Hour)}
		calls = append(calls, c)
	}
	observeAll(e, calls)
	e.Tick(t0.Add(30*time.Minute), nil)
	if _, _, ok := e.Session("s"); !ok {
		t.Fatal("a waiting session was expired before its lease")
	}
	tr := e.Tick(t0.Add(61*time.Minute), nil)
	if len(tr) != 1 || tr[0].From != StateWaiting || tr[0].To != StateStuck {
		t.Fatalf("lease expiry after a long wait: %+v", tr)
	}
}
