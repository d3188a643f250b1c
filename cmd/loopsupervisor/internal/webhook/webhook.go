// Package webhook verifies and parses the Standard Webhooks requests the
// alert_sink exporter sends (docs/webhook.md): the v1 HMAC-SHA256 signature
// (constant-time compare, several secrets), the timestamp window, the body,
// and a replay cache of webhook ids.
package webhook // import "github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// Limits on what a request may carry.
const (
	MaxBodyBytes = 1 << 20
	maxIDLen     = 256
)

// Errors. ErrMalformed wraps everything that is a 400; ErrUnauthorized
// wraps everything that is a 401. No error text contains a secret.
var (
	ErrMalformed    = errors.New("malformed request")
	ErrUnauthorized = errors.New("unauthorized")
)

// Verifier checks requests against one or more keys.
type Verifier struct {
	// Keys are the decoded secrets; a request signed by any of them passes.
	Keys [][]byte
	// Tolerance is the allowed distance of webhook-timestamp from now.
	Tolerance time.Duration
}

// Message is a verified, parsed request.
type Message struct {
	// WebhookID is the webhook-id header, the replay-cache key.
	WebhookID string
	// Timestamp is the webhook-timestamp header.
	Timestamp time.Time
	Body      webhookbody.Body
}

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

func unauthorized(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnauthorized, fmt.Sprintf(format, a...))
}

// Verify checks headers and signature of a request, then parses its body.
// The signature is checked before the body is looked at.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Message, error) {
	var m Message
	id := h.Get(stdwebhook.HeaderID)
	if id == "" || len(id) > maxIDLen || !printable(id) {
		return m, malformed("missing or invalid %s", stdwebhook.HeaderID)
	}
	tsRaw := h.Get(stdwebhook.HeaderTimestamp)
	ts, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil || ts <= 0 || ts > 1<<40 {
		return m, malformed("missing or invalid %s", stdwebhook.HeaderTimestamp)
	}
	t := time.Unix(ts, 0)
	if d := now.Sub(t); d > v.Tolerance || d < -v.Tolerance {
		return m, unauthorized("%s outside the allowed window of ±%s", stdwebhook.HeaderTimestamp, v.Tolerance)
	}
	sigs := h.Get(stdwebhook.HeaderSignature)
	if sigs == "" {
		return m, unauthorized("missing %s", stdwebhook.HeaderSignature)
	}
	if !stdwebhook.Match(v.Keys, id, tsRaw, body, sigs) {
		return m, unauthorized("no valid signature")
	}
	b, err := ParseBody(body)
	if err != nil {
		return m, err
	}
	return Message{WebhookID: id, Timestamp: t, Body: b}, nil
}

func printable(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return false
		}
	}
	return true
}

// ParseBody parses and checks a webhook body.
func ParseBody(raw []byte) (webhookbody.Body, error) {
	var b webhookbody.Body
	if len(raw) > MaxBodyBytes {
		return b, malformed("body larger than %d bytes", MaxBodyBytes)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, malformed("body is not the documented JSON: %v", err)
	}
	switch b.Type {
	case webhookbody.TypeKill, webhookbody.TypeTransition, webhookbody.TypeWarn, webhookbody.TypeRecover, webhookbody.TypeSeen:
	default:
		return b, malformed("unknown type %q", trunc(b.Type))
	}
	if b.ID == "" {
		return b, malformed("body has no id")
	}
	if b.DecidedAt.IsZero() {
		return b, malformed("body has no decided_at")
	}
	if (b.Type == webhookbody.TypeKill || b.Type == webhookbody.TypeWarn || b.Type == webhookbody.TypeRecover || b.Type == webhookbody.TypeSeen) && b.ExpiresAt.IsZero() {
		return b, malformed("%s body has no expires_at", b.Type)
	}
	if b.Type == webhookbody.TypeWarn && b.Action != "warn" {
		return b, malformed("warn body has action %q, want \"warn\"", trunc(b.Action))
	}
	if b.Type == webhookbody.TypeSeen && b.Action != "seen" {
		return b, malformed("seen body has action %q, want \"seen\"", trunc(b.Action))
	}
	if b.Type == webhookbody.TypeRecover && b.Action != "recover" {
		return b, malformed("recover body has action %q, want \"recover\"", trunc(b.Action))
	}
	if b.Type == webhookbody.TypeKill && b.Action != "" && b.Action != "kill" {
		return b, malformed("kill body has action %q, want \"kill\"", trunc(b.Action))
	}
	return b, nil
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ReplayCache remembers webhook ids for a horizon. It is bounded: when full,
// the entry closest to expiry goes first.
type ReplayCache struct {
	mu      sync.Mutex
	horizon time.Duration
	max     int
	seen    map[string]time.Time
}

// NewReplayCache keeps ids for horizon, at most max of them.
func NewReplayCache(horizon time.Duration, maxEntries int) *ReplayCache {
	return &ReplayCache{horizon: horizon, max: maxEntries, seen: map[string]time.Time{}}
}

// Check records id and reports whether it had been seen within the horizon.
func (c *ReplayCache) Check(id string, now time.Time) (seen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, ok := c.seen[id]; ok && now.Before(exp) {
		return true
	}
	if len(c.seen) >= c.max {
		c.prune(now)
	}
	c.seen[id] = now.Add(c.horizon)
	return false
}

func (c *ReplayCache) prune(now time.Time) {
	var oldestID string
	var oldest time.Time
	for id, exp := range c.seen {
		if !now.Before(exp) {
			delete(c.seen, id)
			continue
		}
		if oldestID == "" || exp.Before(oldest) {
			oldestID, oldest = id, exp
		}
	}
	if len(c.seen) >= c.max && oldestID != "" {
		delete(c.seen, oldestID)
	}
}

// Len reports how many ids are remembered.
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}
