//go:build unix

package main

import (
	"fmt"
	"sync"
	"time"
)

// refusalLogInterval is the least time between two logged refusals.
const refusalLogInterval = time.Second

// refusalLog rate-limits the lines logged for refused webhook requests:
// anyone who can reach the port can send them, and a line per request let a
// stranger write 13,350 lines in 15 s into the supervisor's log. At most one
// refusal a second is logged; the next logged line counts the ones left out
// since the previous. The zero value logs at most once a refusalLogInterval.
type refusalLog struct {
	mu sync.Mutex
	// logged is when the last line was written; zero before the first.
	logged time.Time
	// suppressed counts refusals not logged since that line.
	suppressed int
}

// note records one refusal at now and returns the line to log, or "" when
// the refusal is only counted.
func (l *refusalLog) note(now time.Time, format string, args ...any) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.logged.IsZero() && now.Sub(l.logged) < refusalLogInterval {
		l.suppressed++
		return ""
	}
	line := fmt.Sprintf(format, args...)
	if l.suppressed > 0 {
		line += fmt.Sprintf(" (and %d more refused requests not logged since %s)", l.suppressed, l.logged.Format(time.RFC3339))
	}
	l.logged, l.suppressed = now, 0
	return line
}
