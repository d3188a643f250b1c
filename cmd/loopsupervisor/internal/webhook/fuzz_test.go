package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// FuzzVerifyAndParse feeds arbitrary headers and bodies to the verifier.
// It must never panic, must classify every failure as 400 or 401, and must
// accept only what a holder of the key signed.
func FuzzVerifyAndParse(f *testing.F) {
	key, _ := stdwebhook.ParseSecret(vectorSecret)
	now := time.Unix(1764504000, 0)
	body := killBody(now.Add(time.Minute))
	f.Add("ld_1_2.kill", "1764504000", stdwebhook.Sign([][]byte{key}, "ld_1_2.kill", 1764504000, body), body)
	f.Add("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("", "", "", []byte(nil))
	f.Add("x", "-1", "v1,", []byte(`{`))
	f.Add("x", "1764504000", "v2,abc v1,!!!", []byte(`{"type":"loop.kill"}`))
	v := Verifier{Keys: [][]byte{key}, Tolerance: 5 * time.Minute}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(stdwebhook.HeaderID, id)
		h.Set(stdwebhook.HeaderTimestamp, ts)
		h.Set(stdwebhook.HeaderSignature, sig)
		m, err := v.Verify(h, body, now)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if m.WebhookID != h.Get(stdwebhook.HeaderID) || m.Body.ID == "" {
			t.Fatalf("accepted message without ids: %+v", m)
		}
		// Accepted: the signature must really be one the key produces.
		want := "v1," + base64.StdEncoding.EncodeToString(stdwebhook.MAC(v.Keys[0], h.Get(stdwebhook.HeaderID), h.Get(stdwebhook.HeaderTimestamp), body))
		if !slices.Contains(strings.Fields(sig), want) {
			t.Fatal("accepted an unsigned message")
		}
		_, _ = ParseBody(body)
	})
}
