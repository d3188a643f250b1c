package engine

import (
	"strings"
	"time"
)

// internTable gives tool names and error classes small ids, so history
// records stay fixed-size and hold no strings. It holds at most max names;
// when full, the least recently used name unused for minAge gives its id
// to the new one, else the new name reads as "(other)".
type internTable struct {
	ids   map[string]uint16
	names []string
	// used is each id's last use (unix ns); prev and next link the ids in
	// use order (head: most recent; 0, the empty name's id, ends the list).
	used       []int64
	prev, next []uint16
	head, tail uint16
	max        int
	minAge     int64
	// near remembers the id of a recently used name in a slot picked by a
	// cheap function of the name, and a hit is checked against names: an
	// id names one name at a time. Hashing each call's tool name into ids
	// showed in the profile of a tool call; an agent calls few tools.
	near [nearSlots]uint16
}

// nearSlots is the size of internTable.near (a power of two).
const nearSlots = 64

// nearSlot picks name's slot in internTable.near from its length and its
// first and last bytes: tool names differ there, and reading them is cheap.
func nearSlot(name string) int {
	return (len(name)*7 ^ int(name[0]) ^ int(name[len(name)-1])<<2) & (nearSlots - 1)
}

const (
	// maxInternedTotal bounds the tool names kept by the whole engine
	// (split evenly over the shards): a flood of distinct names costs at
	// most this many, about 16 MB at the 128-byte name cap.
	maxInternedTotal = 1 << 16
	// defaultNameAge is how long a name must be unused before it may be
	// evicted when idle expiry is off.
	defaultNameAge = 30 * time.Minute
	otherName      = "(other)"
	// otherID stands for every name past the table's capacity; it never
	// makes two calls twins.
	otherID       = 1
	maxToolName   = 128
	maxErrorClass = 64
	tagFailure    = 0x7fa11ed0c0ffee01
	// maxShownError is the length canon's Normalizer.ShownError cuts a
	// quoted error text to, before its "…": a longer ToolCall.ErrorText
	// (a caller of its own) is cut here, so a session keeps no more.
	maxShownError = 120
)

func (t *internTable) init(max int, minAge int64) {
	t.ids = make(map[string]uint16)
	t.names = []string{"", otherName}
	t.used = []int64{0, 0}
	t.prev, t.next = []uint16{0, 0}, []uint16{0, 0}
	t.head, t.tail = 0, 0
	t.max = min(max+2, 1<<16)
	t.minAge = minAge
}

func (t *internTable) id(name string, now int64) uint16 {
	if name == "" {
		return 0
	}
	slot := nearSlot(name)
	if id := t.near[slot]; id > otherID && t.names[id] == name {
		t.touch(id, now)
		return id
	}
	if id, ok := t.ids[name]; ok {
		t.near[slot] = id
		t.touch(id, now)
		return id
	}
	var id uint16
	switch {
	case len(t.names) < t.max:
		id = uint16(len(t.names))
		t.names = append(t.names, "")
		t.used = append(t.used, 0)
		t.prev, t.next = append(t.prev, 0), append(t.next, 0)
	case t.tail != 0 && now-t.used[t.tail] >= t.minAge:
		id = t.tail
		t.unlink(id)
		delete(t.ids, t.names[id])
	default:
		return otherID
	}
	n := strings.Clone(name)
	t.names[id], t.used[id] = n, now
	t.ids[n] = id
	t.near[slot] = id
	t.pushFront(id)
	return id
}

// touch marks id used at now.
func (t *internTable) touch(id uint16, now int64) {
	t.used[id] = now
	if t.head != id {
		t.toFront(id)
	}
}

func (t *internTable) pushFront(id uint16) {
	t.prev[id], t.next[id] = 0, t.head
	if t.head != 0 {
		t.prev[t.head] = id
	}
	t.head = id
	if t.tail == 0 {
		t.tail = id
	}
}

func (t *internTable) unlink(id uint16) {
	if p := t.prev[id]; p != 0 {
		t.next[p] = t.next[id]
	} else {
		t.head = t.next[id]
	}
	if n := t.next[id]; n != 0 {
		t.prev[n] = t.prev[id]
	} else {
		t.tail = t.prev[id]
	}
	t.prev[id], t.next[id] = 0, 0
}

func (t *internTable) toFront(id uint16) {
	if t.head != id {
		t.unlink(id)
		t.pushFront(id)
	}
}

func (t *internTable) name(id uint16) string {
	if int(id) < len(t.names) {
		return t.names[id]
	}
	return otherName
}

// internedNames is the number of tool names the engine keeps.
func (e *Engine) internedNames() int {
	n := 0
	for i := range e.shards {
		e.shards[i].mu.Lock()
		n += len(e.shards[i].names.ids)
		e.shards[i].mu.Unlock()
	}
	return n
}
