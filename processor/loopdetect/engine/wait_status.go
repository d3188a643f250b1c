// The status reader: what a polled job's result says of the job. Only
// recognised forms count — free text is never a lease:
//   - a status member, JSON or tag: "status": "in_progress", "state",
//     "phase", "conclusion", "retrieval_status", <status>running</status>
//     (the values as implicit_wait.pending_states and done_states list them);
//   - kubectl rollout status: "Waiting for deployment … rollout to finish"
//     (pending) and "successfully rolled out" (done); gh run watch cut off
//     while it watched ("Refreshing run status every 3 seconds");
//   - an HTTP status line of 202 Accepted (pending: the work goes on);
//   - a progress figure below 100 % on a line that says what progresses
//     ("Progress: 45%", "45% complete").
//
// A status member decides when there is one: the job is pending when some
// member says so and none says it is done (gh run view's
// {"status":"completed","conclusion":"failure"} is done). The other forms
// are read only without a status member.

package engine

import "strings"

// JobState is what a poll's result says of the polled job.
type JobState uint8

// The job states.
const (
	// JobUnknown: no recognised status (also a failed poll, or none recorded).
	JobUnknown JobState = iota
	// JobPending: the job has not finished (queued, in progress, waiting).
	JobPending
	// JobDone: the job has finished, whatever its outcome.
	JobDone
)

var jobStateNames = [...]string{"unknown", "pending", "done"}

func (s JobState) String() string {
	if int(s) < len(jobStateNames) {
		return jobStateNames[s]
	}
	return "unknown"
}

// maxStatusScan bounds the bytes of a result read for a status: its head
// and its tail, where status lines and members are.
const maxStatusScan = 8 << 10

// statusKeys are the members whose value is a job's state.
var statusKeys = [...]string{"status", "state", "phase", "conclusion", "retrieval_status"}

// valueSet is a set of status values, matched case-insensitively with
// '-', ' ' and '_' alike (in_progress, In Progress, in-progress).
type valueSet map[string]struct{}

func newValueSet(values []string) valueSet {
	s := make(valueSet, len(values))
	for _, v := range values {
		s[foldValue(v)] = struct{}{}
	}
	return s
}

func (s valueSet) has(v string) bool {
	_, ok := s[foldValue(v)]
	return ok
}

// foldValue lowercases v and spells its separators '_'.
func foldValue(v string) string {
	v = strings.TrimSpace(v)
	clean := true
	for i := 0; i < len(v); i++ {
		if c := v[i]; c >= 'A' && c <= 'Z' || c == '-' || c == ' ' {
			clean = false
			break
		}
	}
	if clean {
		return v
	}
	b := []byte(v)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c == '-' || c == ' ':
			b[i] = '_'
		}
	}
	return string(b)
}

// statusReader reads a result for its job's state.
type statusReader struct {
	pending, done valueSet
}

// state is what result says of the job.
func (r *statusReader) state(result string) JobState {
	if len(result) > maxStatusScan {
		head, tail := result[:maxStatusScan/2], result[len(result)-maxStatusScan/2:]
		return r.merge(r.scan(head), r.scan(tail))
	}
	return r.merge(r.scan(result), statusScan{})
}

// statusScan counts what one pass over a text found.
type statusScan struct {
	members, pendingMembers, doneMembers int
	rolloutWaiting, rolloutDone          bool
	accepted                             bool
	progress, complete                   bool
}

func (r *statusReader) merge(a, b statusScan) JobState {
	if a.members+b.members > 0 {
		if a.doneMembers+b.doneMembers == 0 && a.pendingMembers+b.pendingMembers > 0 {
			return JobPending
		}
		if a.doneMembers+b.doneMembers > 0 {
			return JobDone
		}
		return JobUnknown
	}
	switch {
	case a.rolloutDone || b.rolloutDone || a.complete || b.complete:
		return JobDone
	case a.rolloutWaiting || b.rolloutWaiting || a.accepted || b.accepted || a.progress || b.progress:
		return JobPending
	}
	return JobUnknown
}

// scan reads one text: status members wherever they are, the other forms
// line by line.
func (r *statusReader) scan(text string) statusScan {
	var st statusScan
	r.members(text, &st)
	if st.members > 0 {
		return st
	}
	for line := range strings.Lines(text) {
		readStatusLine(strings.TrimSpace(line), &st)
	}
	return st
}

// members finds the status members of text: "key": "value" (also inside a
// JSON-encoded string, its quotes escaped) and <key>value</key>.
func (r *statusReader) members(text string, st *statusScan) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '"' && c != '<' {
			continue
		}
		key, end, ok := statusKeyAt(text, i+1)
		if !ok {
			continue
		}
		var value string
		var found bool
		if c == '<' {
			value, found = tagValue(text, end, key)
		} else {
			value, found = memberValue(text, end)
		}
		if !found || strings.TrimSpace(value) == "" {
			continue // "conclusion": "" says nothing yet
		}
		st.members++
		switch {
		case r.done.has(value):
			st.doneMembers++
		case r.pending.has(value):
			st.pendingMembers++
		}
	}
}

// statusKeyAt reads a status key at i, closed by a quote (maybe escaped)
// or '>', and returns the index after the closing byte.
func statusKeyAt(text string, i int) (key string, end int, ok bool) {
	j := i
	for j < len(text) && (text[j] >= 'a' && text[j] <= 'z' || text[j] >= 'A' && text[j] <= 'Z' || text[j] == '_') {
		j++
	}
	if j == i || j-i > len("retrieval_status") {
		return "", 0, false
	}
	word := strings.ToLower(text[i:j])
	matched := false
	for _, k := range statusKeys {
		if word == k {
			matched = true
			break
		}
	}
	if !matched {
		return "", 0, false
	}
	if j < len(text) && text[j] == '\\' {
		j++
	}
	if j >= len(text) || (text[j] != '"' && text[j] != '>') {
		return "", 0, false
	}
	return word, j + 1, true
}

// memberValue reads `: "value"` after a JSON key (quotes maybe escaped).
func memberValue(text string, i int) (string, bool) {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	if i >= len(text) || text[i] != ':' {
		return "", false
	}
	i++
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	if i < len(text) && text[i] == '\\' {
		i++
	}
	if i >= len(text) || text[i] != '"' {
		return "", false // a number, an object: no state named
	}
	i++
	end := strings.IndexAny(text[i:], "\"\\")
	if end < 0 || end > 64 {
		return "", false
	}
	return text[i : i+end], true
}

// tagValue reads `value</key>` after <key>.
func tagValue(text string, i int, key string) (string, bool) {
	end := strings.IndexByte(text[i:], '<')
	if end < 0 || end > 64 || !strings.HasPrefix(text[i+end:], "</") {
		return "", false
	}
	closing := text[i+end+2:]
	if len(closing) < len(key)+1 || !strings.EqualFold(closing[:len(key)], key) || closing[len(key)] != '>' {
		return "", false
	}
	return text[i : i+end], true
}

// progressWords say what a percentage on their line measures.
var progressWords = [...]string{"progress", "complete", "completed", "done", "downloading", "uploading", "building", "deploying", "processing", "copying", "extracting", "installing"}

// readStatusLine reads one line for the forms other than status members.
func readStatusLine(line string, st *statusScan) {
	switch {
	case line == "":
	case strings.HasPrefix(line, "Waiting for ") && (strings.Contains(line, "rollout") || strings.Contains(line, "replicas") || strings.Contains(line, "to be observed")):
		st.rolloutWaiting = true
	case strings.Contains(line, "successfully rolled out"):
		st.rolloutDone = true
	case strings.HasPrefix(line, "Refreshing run status every "):
		st.rolloutWaiting = true // gh run watch, cut off while it watched
	case strings.HasPrefix(line, "HTTP/"):
		if _, rest, ok := strings.Cut(line, " "); ok && (rest == "202" || strings.HasPrefix(rest, "202 ")) {
			st.accepted = true
		}
	default:
		pct, ok := percentage(line)
		if !ok {
			return
		}
		lower := strings.ToLower(line)
		for _, w := range progressWords {
			if strings.Contains(lower, w) {
				if pct < 100 {
					st.progress = true
				} else {
					st.complete = true
				}
				return
			}
		}
	}
}

// percentage reads the first "N%" or "N.M%" of a line.
func percentage(line string) (float64, bool) {
	i := strings.IndexByte(line, '%')
	for i > 0 {
		j := i
		for j > 0 && (line[j-1] >= '0' && line[j-1] <= '9' || line[j-1] == '.') {
			j--
		}
		if j < i {
			if f, ok := sleepSeconds(line[j:i]); ok {
				return f, true
			}
		}
		next := strings.IndexByte(line[i+1:], '%')
		if next < 0 {
			break
		}
		i += next + 1
	}
	return 0, false
}
