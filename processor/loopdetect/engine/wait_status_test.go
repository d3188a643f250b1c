package engine

import (
	"strings"
	"testing"
)

// TestJobState: what a poll's result says of its job. Only the recognised
// forms count; free text is unknown, never pending.
func TestJobState(t *testing.T) {
	cfg := defaultImplicitWait()
	r := statusReader{pending: newValueSet(cfg.PendingStates), done: newValueSet(cfg.DoneStates)}
	for _, tc := range []struct {
		name, result string
		want         JobState
	}{
		// Pending.
		{"gh run view in progress", `{"conclusion":"","status":"in_progress"}`, JobPending},
		{"gh run view queued", "{\"conclusion\":\"\",\"status\":\"queued\"}\n", JobPending},
		{"spaced JSON", `{ "state" : "Running" }`, JobPending},
		{"JSON-encoded JSON", `"{\"status\":\"pending\",\"id\":7}"`, JobPending},
		{"nested status", `{"run":{"id":9,"status":"in progress"}}`, JobPending},
		{"TaskOutput still running", "<retrieval_status>timeout</retrieval_status>\n<task_id>bq1x</task_id>\n<task_type>local_bash</task_type>\n<status>running</status>\n<output>\nbuilding…\n</output>", JobPending},
		{"BashOutput running", "<status>running</status>\n\n<stdout>\nStarting server\n</stdout>", JobPending},
		{"rollout waiting", `Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available...`, JobPending},
		{"rollout spec update", "Waiting for deployment spec update to be observed...", JobPending},
		{"gh run watch cut off", "Refreshing run status every 3 seconds. Press Ctrl+C to quit.\n\n* main CI · 4242\nTriggered via push about 2 minutes ago", JobPending},
		{"HTTP 202", "HTTP/1.1 202 Accepted\ncontent-type: application/json\n\n{\"job\": \"j-1\"}", JobPending},
		{"HTTP/2 202", "HTTP/2 202\r\nlocation: /jobs/1\r\n", JobPending},
		{"progress figure", "Progress: 45% (9/20 files)", JobPending},
		{"percent complete", "Upload 37.5% complete", JobPending},
		// Done.
		{"gh run completed", `{"conclusion":"success","status":"completed"}`, JobDone},
		{"gh run failed", `{"conclusion":"failure","status":"completed"}`, JobDone},
		{"failed status alone", `{"status":"failed"}`, JobDone},
		{"TaskOutput completed", "<retrieval_status>success</retrieval_status>\n<status>completed</status>\n<exit_code>0</exit_code>", JobDone},
		{"rollout done", "Waiting for deployment \"web\" rollout to finish: 2 of 3 updated replicas are available...\ndeployment \"web\" successfully rolled out", JobDone},
		{"progress at 100", "Progress: 100% complete", JobDone},
		{"mixed runs", `[{"status":"completed"},{"status":"in_progress"}]`, JobDone},
		// Unknown: nothing recognised.
		{"free text", "still running, please wait", JobUnknown},
		{"empty", "", JobUnknown},
		{"empty conclusion only", `{"conclusion":""}`, JobUnknown},
		{"status of another kind", `{"status":"ok"}`, JobUnknown},
		{"numeric status", `{"status": 202}`, JobUnknown},
		{"HTTP 200", "HTTP/1.1 200 OK\n\nhello", JobUnknown},
		{"a percentage without a progress word", "coverage: 85.2% of statements", JobUnknown},
		{"statuses, a prefix", `{"statuses":"running"}`, JobUnknown},
		{"a status member wins over lines", "{\"status\":\"ok\"}\nProgress: 45%", JobUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.state(tc.result); got != tc.want {
				t.Fatalf("state(%q) = %s, want %s", tc.result, got, tc.want)
			}
		})
	}
}

// TestJobStateLongResult: a long result is read at its head and its tail,
// where a status member or a status line is.
func TestJobStateLongResult(t *testing.T) {
	cfg := defaultImplicitWait()
	r := statusReader{pending: newValueSet(cfg.PendingStates), done: newValueSet(cfg.DoneStates)}
	filler := strings.Repeat("compiling module lorem ipsum\n", 2000)
	if got := r.state(filler + `{"status":"running"}`); got != JobPending {
		t.Fatalf("status at the tail: %s", got)
	}
	if got := r.state(`{"status":"queued","log":"` + filler + `"}`); got != JobPending {
		t.Fatalf("status at the head: %s", got)
	}
	if got := r.state(filler + "deployment \"web\" successfully rolled out\n" + filler); got != JobUnknown {
		t.Fatalf("a line in the middle of a long result is not read: %s", got)
	}
}
