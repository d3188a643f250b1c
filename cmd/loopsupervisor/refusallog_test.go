//go:build unix

package main

import (
	"bytes"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
)

// TestRefusalsAreLoggedAtMostOnceASecond: refusals arriving faster than one
// a second are counted, not logged, and the next logged line says how many
// were left out.
func TestRefusalsAreLoggedAtMostOnceASecond(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// at are the refusals' times, as offsets from t0.
		at []time.Duration
		// want are the lines logged, in order ("" for a counted refusal).
		want []string
	}{
		{
			name: "the first refusal is logged",
			at:   []time.Duration{0},
			want: []string{"refused 0"},
		},
		{
			name: "a burst within a second logs its first",
			at:   []time.Duration{0, time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond},
			want: []string{"refused 0", "", "", ""},
		},
		{
			name: "the line after a burst counts the refusals left out",
			at:   []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, time.Second},
			want: []string{"refused 0", "", "", "refused 3 (and 2 more refused requests not logged since 2026-12-06T10:00:00Z)"},
		},
		{
			name: "refusals a second apart are each logged",
			at:   []time.Duration{0, time.Second, 2 * time.Second},
			want: []string{"refused 0", "refused 1", "refused 2"},
		},
		{
			name: "the count starts again after each logged line",
			at:   []time.Duration{0, 1, 1500 * time.Millisecond, 1600 * time.Millisecond, 2600 * time.Millisecond},
			want: []string{"refused 0", "", "refused 2 (and 1 more refused requests not logged since 2026-12-06T10:00:00Z)", "", "refused 4 (and 1 more refused requests not logged since 2026-12-06T10:00:01Z)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l refusalLog
			var got []string
			for i, d := range tc.at {
				got = append(got, l.note(t0.Add(d), "refused %d", i))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestUnsignedFloodLogsOneLine: a burst of unsigned requests at the kill
// webhook is each refused (401) but leaves one line in the log, not one a
// request.
func TestUnsignedFloodLogsOneLine(t *testing.T) {
	var out bytes.Buffer
	key := []byte("0123456789abcdef0123456789abcdef")
	s := &supervisor{
		log:      log.New(&out, "", 0),
		verifier: webhook.Verifier{Keys: [][]byte{key}, Tolerance: time.Minute},
	}
	const requests = 500
	for i := range requests {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/kill", strings.NewReader("{}")))
		require.Equal(t, http.StatusBadRequest, rec.Code, "request %d", i)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// The requests take well under a second, but a slow machine may cross
	// one second boundary: one line, or two with the count on the second.
	require.LessOrEqual(t, len(lines), 2, "log:\n%s", out.String())
	assert.Contains(t, lines[0], "rejected webhook from")
}
