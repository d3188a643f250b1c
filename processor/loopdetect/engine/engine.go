package engine

import (
	"math"
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
}

// Stats are the engine's counters since New.
type Stats struct {
	// Calls counts tool calls observed, duplicates included.
	Calls atomic.Int64
	// Duplicates counts calls dropped as duplicate deliveries or nested spans of one action.
	Duplicates atomic.Int64
	// OutOfOrder counts calls that arrived before a later-started call.
	OutOfOrder atomic.Int64
	// Sessions is the number of tracked sessions.
	Sessions atomic.Int64
	// Evicted counts sessions dropped because MaxSessions was reached.
	Evicted atomic.Int64
	// Expired counts sessions dropped after IdleTimeout.
	Expired atomic.Int64
	// LeasesRejected counts leases not honoured (renewal limit, owner change).
	LeasesRejected atomic.Int64
}

type shard struct {
	mu       sync.Mutex
	sessions map[string]*session
	// LRU list: head is the most recently seen session.
	head, tail *session
	max        int
	names      internTable
}

// New validates cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, keyer: NewKeyer(cfg.DigestKey)}
	for _, c := range cfg.RetryableClasses {
		e.retryable = append(e.retryable, strings.ToLower(c))
	}
	for _, r := range cfg.Kill.Reasons {
		if int(r) < len(e.killReasons) {
			e.killReasons[r] = true
		}
	}
	perShard := (cfg.MaxSessions + numShards - 1) / numShards
	for i := range e.shards {
		e.shards[i].sessions = make(map[string]*session)
		e.shards[i].max = perShard
		e.shards[i].names.init()
	}
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Config returns the configuration the engine runs with.
func (e *Engine) Config() Config { return e.cfg }

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
	e.stats.Calls.Add(1)
	key := c.Session
	if len(key) > maxKept {
		key = "sha:" + strconv.FormatUint(xxhash.Sum64String(key), 16) // bounded map keys
	}
	kh := xxhash.Sum64String(key)
	sh := &e.shards[kh%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.get(e, key, kh)
	nowNs := now.UnixNano()
	s.lastSeen = nowNs
	if s.firstSeen == 0 {
		s.firstSeen = nowNs
	}
	s.noteMeta(c)
	rec := record{
		start:   c.Start.UnixNano(),
		sig:     c.Signature,
		fp:      c.Fingerprint,
		spanID:  c.SpanID,
		parent:  id32(c.ParentSpanID),
		durMs:   uint32(min(max(c.End.Sub(c.Start).Milliseconds(), 0), math.MaxUint32)),
		tool:    sh.names.id(truncate(c.Tool, maxToolName)),
		attempt: uint8(min(max(c.Attempt, 0), math.MaxUint8)),
	}
	rec.setFPSource(c.FingerprintSource)
	if c.CallID != "" {
		rec.callID = uint32(xxhash.Sum64String(c.CallID)) | 1
	}
	if c.LowConfidence() {
		rec.flags |= fLowConf
	}
	if c.Failed {
		rec.flags |= fFailed
		class := truncate(c.ErrorClass, maxErrorClass)
		if e.isRetryable(class) {
			rec.flags |= fRetryable
		}
		// A failure's evidence is its class: error texts carry request ids
		// and times that would otherwise read as progress.
		if c.FingerprintSource != FingerprintAttribute {
			rec.fp = Digest(mix(xxhash.Sum64String(class) ^ tagFailure))
			rec.setFPSource(FingerprintError)
		}
		cloneIfChanged(&s.extras().errClass, class)
	}
	if c.Terminal {
		rec.flags |= fTerminal
	}
	switch s.dedup(&rec) {
	case dedupDrop:
		e.stats.Duplicates.Add(1)
		return out
	case dedupUpgraded:
		e.stats.Duplicates.Add(1)
		return e.evaluate(sh, s, nowNs, TriggerCall, c.SpanID, out)
	}
	if s.insert(rec, e.cfg.HistorySize) {
		e.stats.OutOfOrder.Add(1)
	}
	s.markTokens()
	if s.firstStart == 0 || rec.start < s.firstStart {
		s.firstStart = rec.start
	}
	if c.Policy.MaxAttempts > 0 {
		s.extras().policy = c.Policy
	}
	if !s.noteLease(c.Lease, e.cfg.MaxLeaseRenewals, nowNs) {
		e.stats.LeasesRejected.Add(1)
	}
	return e.evaluate(sh, s, nowNs, TriggerCall, c.SpanID, out)
}

// Tick runs the timer-driven checks at now: idle expiry, wait lease expiry
// and the backstop. It appends the resulting transitions to out.
func (e *Engine) Tick(now time.Time, out []Transition) []Transition {
	nowNs := now.UnixNano()
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		if e.cfg.IdleTimeout > 0 {
			limit := nowNs - int64(e.cfg.IdleTimeout)
			// A session waiting on a lease is kept until the lease's expiry
			// has been judged, however long the wait.
			for spared := 0; sh.tail != nil && sh.tail.lastSeen < limit && spared < len(sh.sessions); {
				if s := sh.tail; s.leaseValid(nowNs) || (s.state == StateWaiting && s.x != nil && s.x.lease.active) {
					sh.moveToFront(s)
					spared++
					continue
				}
				sh.remove(sh.tail)
				e.stats.Expired.Add(1)
				e.stats.Sessions.Add(-1)
			}
		}
		for _, s := range sh.sessions {
			leaseEnded := s.state == StateWaiting && !s.leaseValid(nowNs)
			backstop := e.cfg.Backstop > 0 && s.firstSeen > 0 && nowNs-s.firstSeen >= int64(e.cfg.Backstop) && (s.x == nil || !s.x.loop.backstop)
			if leaseEnded || backstop {
				out = e.evaluate(sh, s, nowNs, TriggerTick, [8]byte{}, out)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// Session reports a tracked session's state, for tests and diagnostics.
func (e *Engine) Session(key string) (State, Reason, bool) {
	kh := xxhash.Sum64String(key)
	sh := &e.shards[kh%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.sessions[key]
	if !ok {
		return StateWorking, ReasonNone, false
	}
	return s.state, s.reason, true
}

func (sh *shard) get(e *Engine, key string, kh uint64) *session {
	if s, ok := sh.sessions[key]; ok {
		sh.moveToFront(s)
		return s
	}
	if len(sh.sessions) >= sh.max && sh.tail != nil {
		sh.remove(sh.tail)
		e.stats.Evicted.Add(1)
		e.stats.Sessions.Add(-1)
	}
	s := &session{key: strings.Clone(key), keyHash: kh}
	sh.sessions[s.key] = s
	sh.pushFront(s)
	e.stats.Sessions.Add(1)
	return s
}

func (sh *shard) pushFront(s *session) {
	s.prev, s.next = nil, sh.head
	if sh.head != nil {
		sh.head.prev = s
	}
	sh.head = s
	if sh.tail == nil {
		sh.tail = s
	}
}

func (sh *shard) unlink(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		sh.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		sh.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

func (sh *shard) moveToFront(s *session) {
	if sh.head == s {
		return
	}
	sh.unlink(s)
	sh.pushFront(s)
}

func (sh *shard) remove(s *session) {
	sh.unlink(s)
	delete(sh.sessions, s.key)
}

// internTable gives tool names and error classes small ids, so history
// records stay fixed-size and hold no strings.
type internTable struct {
	ids   map[string]uint16
	names []string
}

const (
	maxInterned = 1 << 16
	otherName   = "(other)"
	// otherID stands for every name past the table's capacity; it never
	// makes two calls twins.
	otherID       = 1
	maxToolName   = 128
	maxErrorClass = 64
	tagFailure    = 0x7fa11ed0c0ffee01
)

func (t *internTable) init() {
	t.ids = make(map[string]uint16)
	t.names = []string{"", otherName}
}

func (t *internTable) id(name string) uint16 {
	if name == "" {
		return 0
	}
	if id, ok := t.ids[name]; ok {
		return id
	}
	if len(t.names) >= maxInterned {
		return otherID
	}
	n := strings.Clone(name)
	id := uint16(len(t.names))
	t.names = append(t.names, n)
	t.ids[n] = id
	return id
}

func (t *internTable) name(id uint16) string {
	if int(id) < len(t.names) {
		return t.names[id]
	}
	return otherName
}

func eventID(keyHash uint64, seq int64) string {
	return "ld_" + strconv.FormatUint(keyHash, 16) + "_" + strconv.FormatInt(seq, 10)
}
