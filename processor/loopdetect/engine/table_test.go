package engine

import (
	"testing"
	"unsafe"
)

// sessions is every tracked session, for tests (no lock: the engine must
// be idle).
func (e *Engine) sessions() []*session {
	var all []*session
	for i := range e.shards {
		e.shards[i].tab.each(func(_ uint32, s *session) { all = append(all, s) })
	}
	return all
}

func TestSessionHotPartIsFourCacheLines(t *testing.T) {
	if got := unsafe.Sizeof(session{}); got != 256 {
		t.Fatalf("session is %d bytes, the layout assumes 256", got)
	}
}
