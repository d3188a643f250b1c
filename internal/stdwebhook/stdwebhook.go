// Package stdwebhook implements the Standard Webhooks v1 signature
// (https://www.standardwebhooks.com): HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>", base64-encoded and prefixed
// with "v1,". The alert_sink exporter signs with it and the supervisor
// verifies with it. Several secrets (key rotation) give several space-separated
// signatures.
package stdwebhook // import "github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every Standard Webhooks secret; the rest is the
// base64 encoding of the key.
const SecretPrefix = "whsec_"

// Header names of the Standard Webhooks specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// MinKeyBytes and MaxKeyBytes bound the decoded key length (the
// specification asks for 24..64 random bytes).
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
)

// ErrSecretFormat reports a secret that is not "whsec_<base64>". The error
// never contains the secret.
var ErrSecretFormat = errors.New("secret must be \"whsec_\" followed by the base64 encoding of 24 to 64 random bytes")

// ParseSecret decodes a "whsec_<base64>" secret into its key.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, ErrSecretFormat
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, ErrSecretFormat
	}
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return nil, ErrSecretFormat
	}
	return key, nil
}

// Sign returns the webhook-signature header value for the message: one
// "v1,<base64>" per key, space-separated, in key order.
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	ts := strconv.FormatInt(timestamp, 10)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(MAC(k, id, ts, body)))
	}
	return b.String()
}

// MAC is one key's raw signature of a message (ts in decimal seconds);
// receivers compare it in constant time.
func MAC(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Match reports whether any "v1,<base64>" entry of sigs (a webhook-signature
// value) is a valid signature of (id, ts, body) under any of keys. Every
// comparison is constant-time; at most maxMatchSignatures entries are
// looked at.
func Match(keys [][]byte, id, ts string, body []byte, sigs string) bool {
	fields := strings.Fields(sigs)
	if len(fields) > maxMatchSignatures {
		fields = fields[:maxMatchSignatures]
	}
	ok := false
	for _, k := range keys {
		want := MAC(k, id, ts, body)
		for _, f := range fields {
			raw, found := strings.CutPrefix(f, "v1,")
			if !found {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(raw)
			if err != nil {
				continue
			}
			if hmac.Equal(want, got) {
				ok = true
			}
		}
	}
	return ok
}

const maxMatchSignatures = 8

// GonePayload is what a 410 Gone answer signs. A 410 Gone answer switches
// a destination off in alert_sink, so it counts only when the receiver
// proves it holds the destination's secret: it answers with the request's
// webhook-id, its own webhook-timestamp, and a webhook-signature over
// "<webhook-id>.<webhook-timestamp>.<GonePayload>".
// The payload is no JSON object, so no webhook body (always an object) has
// the same signature, and an echoed request signature never verifies.
const GonePayload = "410 Gone"

// SignGone returns the webhook-signature value of a 410 answer to the
// webhook webhookID at Unix time timestamp.
func SignGone(keys [][]byte, webhookID string, timestamp int64) string {
	return Sign(keys, webhookID, timestamp, []byte(GonePayload))
}

// VerifyGone reports whether the headers h of a 410 answer prove the
// receiver holds one of keys: webhook-id equal to the request's, a
// webhook-timestamp within tolerance of now, and a matching signature.
func VerifyGone(keys [][]byte, webhookID string, h map[string][]string, now time.Time, tolerance time.Duration) bool {
	if len(keys) == 0 {
		return false
	}
	get := textproto.MIMEHeader(h).Get
	if get(HeaderID) != webhookID {
		return false
	}
	tsRaw := get(HeaderTimestamp)
	ts, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil || ts <= 0 || ts > 1<<40 {
		return false
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return false
	}
	return Match(keys, webhookID, tsRaw, []byte(GonePayload), get(HeaderSignature))
}
