package engine

import (
	"hash/maphash"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

// numShards splits sessions so concurrent batches rarely share a lock.
const numShards = 16

// Engine tracks sessions and decides verdicts. It is safe for concurrent use.
type Engine struct {
	cfg         Config
	keyer       *Keyer
	retryable   []string
	killReasons [len(reasonNames)]bool
	shards      [numShards]shard
	stats       Stats
	// shardSeed keys the session keys' hash (hashKey), which picks the
	// shard and the slot in its index: with a per-process random key a
	// sender cannot pick session keys that all land in one shard.
	shardSeed maphash.Seed
}

// Stats are the engine's counters since New.
type Stats struct {
	// Duplicates counts calls dropped as duplicate deliveries or nested spans of one action.
	Duplicates atomic.Int64
	// OutOfOrder counts calls that arrived before a later-started call.
	OutOfOrder atomic.Int64
	// Sessions is the number of tracked sessions.
	Sessions atomic.Int64
	// Evicted counts sessions dropped because MaxSessions was reached (a
	// global bound: nothing is evicted before it, and Sessions never
	// passes it).
	Evicted atomic.Int64
	// Expired counts sessions dropped after IdleTimeout.
	Expired atomic.Int64
	// LeasesRejected counts leases not honoured (renewal limit, owner
	// change), implicit ones included (a job whose lease ran out polled
	// again, a third job at once, the renewal limit).
	LeasesRejected atomic.Int64
}

type shard struct {
	mu    sync.Mutex
	tab   sessionTable
	names internTable
	// descs holds one copy of each description the shard's sessions
	// share (describe).
	descs map[sessionDesc]*sessionDesc
	// win is the evaluation window of the session being evaluated (one
	// at a time, under mu), reused so evaluating allocates nothing.
	win window
}

// New validates cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, keyer: NewKeyer(cfg.DigestKey), shardSeed: maphash.MakeSeed()}
	for _, c := range cfg.Retry.RetryableClasses {
		e.retryable = append(e.retryable, strings.ToLower(c))
	}
	for _, r := range cfg.Kill.Reasons {
		if int(r) < len(e.killReasons) {
			e.killReasons[r] = true
		}
	}
	// Tool names unused for the idle timeout may make room for new ones.
	// A history record older than that may then show the id's new name:
	// only in an explanation's tool list, since twins are told apart among
	// spans nested in one another, which are never that far apart.
	nameAge := cfg.IdleTimeout
	if nameAge <= 0 {
		nameAge = defaultNameAge
	}
	for i := range e.shards {
		e.shards[i].tab.init(cfg.HistorySize)
		e.shards[i].names.init(maxInternedTotal/numShards, int64(nameAge))
	}
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

func (e *Engine) isRetryable(class string) bool {
	if class == "" {
		return false
	}
	var buf [128]byte
	lc := buf[:0]
	for i := 0; i < len(class) && i < len(buf); i++ {
		c := class[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lc = append(lc, c)
	}
	for _, r := range e.retryable {
		if strings.Contains(string(lc), r) {
			return true
		}
	}
	return false
}

// Observe feeds one tool call at time now and appends the resulting
// transitions (usually none) to out.
func (e *Engine) Observe(c *ToolCall, now time.Time, out []Transition) []Transition {
	key := tokenKey(c.Session)
	sh, h := e.shardFor(key)
	nowNs := now.UnixNano()
	// What the call says is read before the session is found: the
	// session's look-up misses the caches at scale, and then the history
	// check follows it at once.
	var rec record
	class := e.fillRecord(&rec, c)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec.tool = sh.names.id(truncate(c.Tool, maxToolName), nowNs)
	s, hist := sh.get(e, key, h, nowNs)
	outcome := s.dedup(hist, &rec)
	if s.firstSeen == 0 {
		s.firstSeen = nowNs
	}
	s.noteMeta(sh, c)
	if c.Failed {
		cloneIfChanged(&s.extras().errClass, class)
		cloneIfChanged(&s.x.errText, truncate(c.ErrorText, maxShownError+len("…")))
	}
	switch outcome {
	case dedupDrop:
		e.stats.Duplicates.Add(1)
		return out
	case dedupUpgraded:
		e.stats.Duplicates.Add(1)
		e.noteWait(s, c, nowNs) // the twin may be the one with the result
		return e.evaluate(sh, s, nowNs, TriggerCall, c.SpanID, out)
	}
	pos, outOfOrder := s.insert(&rec, e.cfg.HistorySize)
	if outOfOrder {
		e.stats.OutOfOrder.Add(1)
	}
	if pos >= 0 {
		r := &s.hist[pos]
		s.cycles.observe(r)
		if r.has(fFailed) {
			s.x.streak.observe(r, c, uint32(xxhash.Sum64String(s.x.errClass)), s.total)
		} else if s.x != nil && s.x.streak.count > 0 {
			s.x.streak.observe(r, c, 0, s.total)
		}
	}
	s.markTokens()
	if s.firstStart == 0 || rec.start < s.firstStart {
		s.firstStart = rec.start
	}
	if c.Policy.MaxAttempts > 0 {
		s.extras().policy = c.Policy
	}
	if !s.noteLease(c.Lease, e.cfg.Lease.MaxRenewals, nowNs) {
		e.stats.LeasesRejected.Add(1)
	}
	e.noteWait(s, c, nowNs)
	return e.evaluate(sh, s, nowNs, TriggerCall, c.SpanID, out)
}

// noteWait notes the job c polls, if any: one comparison for a call that
// polls nothing.
func (e *Engine) noteWait(s *session, c *ToolCall, now int64) {
	if c.Wait.Owner == 0 || !e.cfg.ImplicitWait.Enabled {
		return
	}
	if c.Failed {
		return // a failed poll says nothing of its job
	}
	if s.noteWait(&c.Wait, c.Tool, &e.cfg.ImplicitWait, now) == waitRejected {
		e.stats.LeasesRejected.Add(1)
	}
}

// fillRecord writes c's history record into rec, all but the tool's id
// (the shard's), and returns the failure's error class, bounded.
func (e *Engine) fillRecord(rec *record, c *ToolCall) string {
	// Field by field: a composite literal is built in a temporary and
	// copied with wide loads right after its narrow stores, which stalled
	// on store forwarding in the profile.
	rec.start = c.Start.UnixNano()
	rec.sig = c.Signature
	rec.fp = c.Fingerprint
	rec.spanID = c.SpanID
	rec.parent = id32(c.ParentSpanID)
	rec.durUs = micros(c.End.Sub(c.Start))
	rec.attempt = uint8(min(max(c.Attempt, 0), math.MaxUint8))
	rec.setFPSource(c.FingerprintSource)
	if c.CallID != "" {
		rec.callID = uint32(xxhash.Sum64String(c.CallID)) | 1
	}
	if c.LowConfidence() {
		rec.flags |= fLowConf
	}
	if c.Terminal {
		rec.flags |= fTerminal
	}
	if !c.Failed {
		return ""
	}
	rec.flags |= fFailed
	class := truncate(c.ErrorClass, maxErrorClass)
	if e.isRetryable(class) {
		rec.flags |= fRetryable
	}
	// A failure's evidence is its class, plus the error text and the
	// result when the caller normalized them (Normalizer.Failure): raw
	// error texts carry request ids and times that would otherwise read
	// as progress.
	if c.FingerprintSource != FingerprintAttribute && c.FingerprintSource != FingerprintError {
		rec.fp = failureDigest(class, 0)
		rec.setFPSource(FingerprintError)
	}
	return class
}

// Tick runs the timer-driven checks at now: idle expiry, wait lease expiry
// and the backstop. It appends the resulting transitions to out.
func (e *Engine) Tick(now time.Time, out []Transition) []Transition {
	nowNs := now.UnixNano()
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		out = e.tickShard(sh, nowNs, out)
		sh.mu.Unlock()
	}
	return out
}

// tickShard expires sh's idle sessions and runs the timer checks of the
// others, in one pass over its slab; it leaves the table's oldestSeen
// exact.
func (e *Engine) tickShard(sh *shard, nowNs int64, out []Transition) []Transition {
	limit := int64(math.MinInt64)
	if e.cfg.IdleTimeout > 0 {
		limit = nowNs - int64(e.cfg.IdleTimeout)
	}
	oldest := int64(math.MaxInt64)
	sh.tab.each(func(_ uint32, s *session) {
		// A session waiting on a lease is kept until the lease's expiry
		// has been judged, however long the wait.
		if s.lastSeen < limit && !s.leaseValid(nowNs) && (s.state != StateWaiting || s.x == nil || (!s.x.lease.active && !s.waitHeld())) {
			sh.tab.removeSession(e, s)
			e.stats.Expired.Add(1)
			e.stats.Sessions.Add(-1)
			return
		}
		oldest = min(oldest, s.lastSeen)
		leaseEnded := s.state == StateWaiting && !s.leaseValid(nowNs) && s.waitCovered(nowNs) == nil
		backstop := e.cfg.Backstop > 0 && s.firstSeen > 0 && nowNs-s.firstSeen >= int64(e.cfg.Backstop) && (s.x == nil || !s.x.loop.backstop)
		if leaseEnded || backstop {
			out = e.evaluate(sh, s, nowNs, TriggerTick, [8]byte{}, out)
		}
	})
	sh.tab.oldestSeen = oldest
	sh.tab.compact(e.sessionHash)
	return out
}

// Session reports a tracked session's state, for tests and diagnostics.
func (e *Engine) Session(key string) (State, Reason, bool) {
	sh, h := e.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, _ := sh.tab.find(key, h)
	if s == nil {
		return StateWorking, ReasonNone, false
	}
	return s.state, s.reason, true
}

// hashKey is a session key's keyed hash: its remainder by numShards picks
// the shard, its high half the slot in the shard's table. With a
// per-process random key a sender cannot pick session keys that all land
// in one shard, or in one run of a shard's index.
func (e *Engine) hashKey(key string) uint64 {
	return maphash.String(e.shardSeed, key)
}

// sessionHash is hashKey of s's key.
func (e *Engine) sessionHash(s *session) uint64 { return s.hash(e.shardSeed) }

// shardFor is the shard of a session key, and the key's hash (hashKey),
// with which the shard's table finds it.
func (e *Engine) shardFor(key string) (*shard, uint64) {
	h := e.hashKey(key)
	return &e.shards[h%numShards], h
}

// shardOf is the shard index of a session key.
func (e *Engine) shardOf(key string) uint64 {
	return e.hashKey(key) % numShards
}

// get is key's session (h is its hash), created when new, and marked seen
// at now, with its history (hist, addressed from its position: see
// sessionTable.history). Being seen writes one time into the session,
// whose line the look-up has just read: there is no recency list to
// reorder.
func (sh *shard) get(e *Engine, key string, h uint64, now int64) (s *session, hist []record) {
	t := &sh.tab
	s, p := t.find(key, h)
	if s == nil {
		e.admit(sh, now)
		s, p = t.add(key, h, now)
	}
	s.lastSeen = now
	t.oldestSeen = min(t.oldestSeen, now) // lower only when the caller's clock went back
	return s, t.history(p, s)
}

// admit takes a slot for a new session of sh (whose lock the caller
// holds): below the global bound it counts one more session; at the bound
// it evicts one and the evicted session's slot passes to the new one. The
// count never exceeds MaxSessions, even with every shard admitting at once.
func (e *Engine) admit(sh *shard, now int64) {
	limit := int64(e.cfg.MaxSessions)
	for {
		n := e.stats.Sessions.Load()
		if n < limit {
			if e.stats.Sessions.CompareAndSwap(n, n+1) {
				return
			}
			continue
		}
		if e.evictOne(sh, now) {
			return
		}
		// Our shard is empty and every other one is busy: their holders
		// are not waiting on us (a holder with sessions evicts its own), so
		// one is free again shortly. Or our shard's newest sessions are
		// gone and the sweep met only free positions: the next goes on.
		runtime.Gosched()
	}
}

// evictOne makes room at the global bound. A stale session (no call for
// staleAfter) goes first: one of sh's, else one of another shard's whose
// lock is free at once (never waiting, so shard locks cannot deadlock),
// each found by a bounded sweep of the clock hand. With none found, sh
// gives up its newest session (evictee), or, when sh has none, another
// free shard does. It reports false when it found no session to evict.
func (e *Engine) evictOne(sh *shard, now int64) bool {
	stale := e.staleAfter()
	if p, ok := sh.tab.staleVictim(now, stale, sweepLen); ok {
		e.evict(sh, p)
		return true
	}
	var other *shard
	for i := range e.shards {
		o := &e.shards[i]
		if o == sh || !o.mu.TryLock() {
			continue
		}
		if p, ok := o.tab.staleVictim(now, stale, sweepOtherLen); ok {
			e.evict(o, p)
			o.mu.Unlock()
			if other != nil {
				other.mu.Unlock()
			}
			return true
		}
		if other == nil && sh.tab.live == 0 && o.tab.live > 0 {
			other = o // kept locked: the fallback when sh is empty
			continue
		}
		o.mu.Unlock()
	}
	victim := sh
	if sh.tab.live == 0 {
		if other == nil {
			return false
		}
		victim = other
		defer other.mu.Unlock()
	}
	p, ok := victim.tab.evictee()
	if ok {
		e.evict(victim, p)
	}
	return ok
}

// evict removes the session at slab position p of sh, whose lock the
// caller holds, to make room for a new one.
func (e *Engine) evict(sh *shard, p uint32) {
	sh.tab.removeSession(e, sh.tab.at(p))
	e.stats.Evicted.Add(1)
}

// evictWindow is how many of a shard's newest sessions it remembers for
// eviction.
const evictWindow = 16

// maxStaleAfter is the longest a session may go without a call and still
// be spared at the bound (shorter with a shorter idle_timeout).
const maxStaleAfter = 5 * time.Minute

func (e *Engine) staleAfter() int64 {
	d := maxStaleAfter
	if e.cfg.IdleTimeout > 0 {
		d = min(d, e.cfg.IdleTimeout)
	}
	return int64(d)
}

// evictee is the session a shard gives up at the bound when no stale
// session was found: its most recently created one. So sessions never
// displace older ones that are still calling: a flood of fresh sessions,
// however large, evicts its own newest members, and an agent's session
// that predates the flood and calls at least every staleAfter keeps its
// history (and its loop is still caught). Only a session created after
// the flood began can be lost to it.
func (t *sessionTable) evictee() (uint32, bool) {
	return t.newest(sweepLen)
}

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

func eventID(keyHash uint64, seq int64) string {
	return "ld_" + strconv.FormatUint(keyHash, 16) + "_" + strconv.FormatInt(seq, 10)
}
