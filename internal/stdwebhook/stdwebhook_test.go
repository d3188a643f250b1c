package stdwebhook

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The published Standard Webhooks known-answer vector.
func TestKnownAnswer(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestTwoSecrets(t *testing.T) {
	k1, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	k2, err := ParseSecret("whsec_" + strings.Repeat("QUJD", 10))
	require.NoError(t, err)
	got := Sign([][]byte{k1, k2}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	parts := strings.Split(got, " ")
	require.Len(t, parts, 2)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", parts[0])
	assert.True(t, strings.HasPrefix(parts[1], "v1,"))
	assert.NotEqual(t, parts[0], parts[1])
}

func TestParseSecretErrorsDoNotLeak(t *testing.T) {
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!notbase64", "whsec_QUJD"} {
		_, err := ParseSecret(s)
		require.Error(t, err)
		if s != "" {
			assert.NotContains(t, err.Error(), s)
		}
	}
}

// A signed 410 verifies only for its webhook-id, key and time window, and
// a request's own signature (what a port squatter receives) never passes.
func TestGoneSignature(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	other, err := ParseSecret("whsec_" + strings.Repeat("QUJD", 10))
	require.NoError(t, err)
	now := time.Unix(1614265330, 0)
	h := map[string][]string{
		"Webhook-Id":        {"ld_1.kill"},
		"Webhook-Timestamp": {"1614265330"},
		"Webhook-Signature": {SignGone([][]byte{key}, "ld_1.kill", 1614265330)},
	}
	assert.True(t, VerifyGone([][]byte{other, key}, "ld_1.kill", h, now, time.Minute))
	assert.False(t, VerifyGone([][]byte{other}, "ld_1.kill", h, now, time.Minute))
	assert.False(t, VerifyGone(nil, "ld_1.kill", h, now, time.Minute))
	assert.False(t, VerifyGone([][]byte{key}, "ld_2.kill", h, now, time.Minute))
	assert.False(t, VerifyGone([][]byte{key}, "ld_1.kill", h, now.Add(2*time.Minute), time.Minute))
	h["Webhook-Signature"] = []string{Sign([][]byte{key}, "ld_1.kill", 1614265330, []byte(`{"type":"loop.kill"}`))}
	assert.False(t, VerifyGone([][]byte{key}, "ld_1.kill", h, now, time.Minute))
}
