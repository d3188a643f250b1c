package webhook

import (
	"errors"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

const vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// The published Standard Webhooks known-answer vector.
func TestKnownAnswer(t *testing.T) {
	key, err := stdwebhook.ParseSecret(vectorSecret)
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", stdwebhook.Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body))

	v := Verifier{Keys: [][]byte{key}, Tolerance: 5 * time.Minute}
	h := http.Header{}
	h.Set(stdwebhook.HeaderID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(stdwebhook.HeaderTimestamp, "1614265330")
	h.Set(stdwebhook.HeaderSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	assert.True(t, stdwebhook.Match(v.Keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body, h.Get(stdwebhook.HeaderSignature)))
	// The vector's body is not a loop webhook: signature passes, body is 400.
	_, err = v.Verify(h, body, time.Unix(1614265330, 0))
	assert.ErrorIs(t, err, ErrMalformed)
}

func killBody(expires time.Time) []byte {
	return []byte(`{"type":"loop.kill","id":"ld_1_2","sequence":2,"decided_at":"2026-11-30T12:00:00Z","expires_at":"` +
		expires.UTC().Format(time.RFC3339Nano) + `","session":{"key":"s"},"target":{"service_instance_id":"i","pid":7},` +
		`"transition":{"from":"working","to":"stuck","reason":"frequent_identical","explanation":"x","kill":true}}`)
}

func signed(keys [][]byte, id string, ts int64, body []byte) http.Header {
	h := http.Header{}
	h.Set(stdwebhook.HeaderID, id)
	h.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(stdwebhook.HeaderSignature, stdwebhook.Sign(keys, id, ts, body))
	return h
}

func TestVerify(t *testing.T) {
	k1, _ := stdwebhook.ParseSecret(vectorSecret)
	k2, _ := stdwebhook.ParseSecret("whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24tdGVzdHM=")
	now := time.Now()
	body := killBody(now.Add(time.Minute))
	v := Verifier{Keys: [][]byte{k1}, Tolerance: 5 * time.Minute}

	m, err := v.Verify(signed([][]byte{k1}, "ld_1_2.kill", now.Unix(), body), body, now)
	require.NoError(t, err)
	assert.Equal(t, "ld_1_2.kill", m.WebhookID)
	assert.Equal(t, webhookbody.TypeKill, m.Body.Type)
	assert.Equal(t, "i", m.Body.Target.ServiceInstanceID)

	// Rotation: the sender signs with old and new; either key verifies.
	both := signed([][]byte{k2, k1}, "ld_1_2.kill", now.Unix(), body)
	_, err = v.Verify(both, body, now)
	require.NoError(t, err)
	_, err = (&Verifier{Keys: [][]byte{k2}, Tolerance: time.Minute}).Verify(both, body, now)
	require.NoError(t, err)

	// Forged.
	_, err = v.Verify(signed([][]byte{k2}, "ld_1_2.kill", now.Unix(), body), body, now)
	assert.ErrorIs(t, err, ErrUnauthorized)
	// Tampered body.
	h := signed([][]byte{k1}, "ld_1_2.kill", now.Unix(), body)
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] = 'X'
	_, err = v.Verify(h, tampered, now)
	assert.ErrorIs(t, err, ErrUnauthorized)
	// Outside the window, both sides.
	for _, d := range []time.Duration{-6 * time.Minute, 6 * time.Minute} {
		ts := now.Add(d).Unix()
		_, err = v.Verify(signed([][]byte{k1}, "ld_1_2.kill", ts, body), body, now)
		assert.ErrorIs(t, err, ErrUnauthorized)
	}
	// Missing headers.
	_, err = v.Verify(http.Header{}, body, now)
	assert.ErrorIs(t, err, ErrMalformed)
	h = signed([][]byte{k1}, "ld_1_2.kill", now.Unix(), body)
	h.Del(stdwebhook.HeaderSignature)
	_, err = v.Verify(h, body, now)
	assert.ErrorIs(t, err, ErrUnauthorized)
	// Kill without expires_at.
	nb := []byte(`{"type":"loop.kill","id":"a","decided_at":"2026-11-30T12:00:00Z"}`)
	_, err = v.Verify(signed([][]byte{k1}, "a", now.Unix(), nb), nb, now)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.False(t, errors.Is(err, ErrUnauthorized))
}

func TestReplayCache(t *testing.T) {
	c := NewReplayCache(time.Minute, 3)
	now := time.Now()
	assert.False(t, c.Check("a", now))
	assert.True(t, c.Check("a", now.Add(30*time.Second)))
	assert.False(t, c.Check("a", now.Add(2*time.Minute)), "forgotten after the horizon")
	for i := range 10 {
		c.Check(strconv.Itoa(i), now)
	}
	assert.LessOrEqual(t, c.Len(), 3)
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "whsec_@@@", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_QUJD"} {
		_, err := stdwebhook.ParseSecret(s)
		assert.Error(t, err, s)
	}
}
