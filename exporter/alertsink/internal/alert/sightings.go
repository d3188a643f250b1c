package alert

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// Sightings remembers the agent instances (service.instance.id) whose
// telemetry this collector run has received, so that each gets one
// loop.seen notice: its supervisor learns that the agent is watched, and
// says so when it is not. It is bounded: past max instances the oldest is
// forgotten (and would be announced again).
type Sightings struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string
	next int
	// run makes the notices' ids differ across collector runs: a
	// supervisor deduplicates on the id, and a restarted collector that
	// sees the agent again should say so.
	run string
}

// NewSightings remembers up to max instances.
func NewSightings(max int) *Sightings {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Sightings{seen: make(map[string]struct{}, max), ring: make([]string, max), run: hex.EncodeToString(b[:])}
}

// first reports whether the instance id is new to this run, remembering it.
func (s *Sightings) first(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[id]; ok {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.seen, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.seen[id] = struct{}{}
	return true
}

// SeenRecord returns a loop.seen record when the resource's instance is
// new to this run (ok); a resource without a service.instance.id (no
// supervisor can be waiting for it) gets none, and so does every resource
// without the kill destination.
func (p *Policy) SeenRecord(s *Sightings, res pcommon.Map, now time.Time) (rec Record, ok bool, err error) {
	if !p.Kill || s == nil || !p.routesTo(Route(res)) {
		return rec, false, nil
	}
	v, found := res.Get("service.instance.id")
	if !found || v.Str() == "" || !s.first(v.Str()) {
		return rec, false, nil
	}
	var ev loopevent.Event
	FillTarget(&ev, res)
	// The id names the instance by its keyed digest too, never the id.
	id := fmt.Sprintf("seen_%s_%016x", s.run, xxhash.Sum64String(digest(p.KillKey, ev.Target.ServiceInstanceID)))
	exp := now.Add(p.KillTTL)
	b := webhookbody.Body{
		SchemaVersion: webhookbody.SchemaVersion, Type: webhookbody.TypeSeen, ID: id, DecidedAt: now.UTC(), ExpiresAt: exp.UTC(),
		Action: webhookbody.ActionSeen,
		Target: webhookbody.Target{ServiceName: ev.Target.ServiceName, InstanceDigest: digest(p.KillKey, ev.Target.ServiceInstanceID), PID: ev.Target.PID, HostName: ev.Target.HostName},
	}
	raw, err := Marshal(&b)
	if err != nil {
		return rec, false, fmt.Errorf("alert_sink: rendering seen body: %w", err)
	}
	return Record{Dest: DestKill, WebhookID: id + ".seen", EventID: id, Type: webhookbody.TypeSeen, ExpiresAt: exp, Body: raw}, true, nil
}
