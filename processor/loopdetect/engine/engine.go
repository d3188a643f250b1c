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
	// EvictedStale and EvictedActive split Evicted: sessions without a
	// call for the stale time (5 minutes, or idle_timeout if shorter), and
	// sessions still calling, each the newest of the sender holding the
	// most sessions of its shard. Active evictions mean a flood (its own
	// sessions go) or a max_sessions too low for the agents.
	EvictedStale, EvictedActive atomic.Int64
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
	if err := cfg.Validate(); err != nil {
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
	s, hist, tokens := sh.get(e, key, h, nowNs)
	outcome := s.dedup(hist, &rec)
	if s.firstSeen == 0 {
		s.firstSeen = nowNs
	}
	s.noteMeta(sh, c)
	if c.Failed {
		cloneIfChanged(&s.extras().errClass, class)
		cloneIfChanged(&s.extra.errText, truncate(c.ErrorText, maxShownError+len("…")))
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
			s.extra.streak.observe(r, c, uint32(xxhash.Sum64String(s.extra.errClass)), s.total)
		} else if s.extra != nil && s.extra.streak.count > 0 {
			s.extra.streak.observe(r, c, 0, s.total)
		}
	}
	s.markTokens(tokens)
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
	// result when the caller normalized them (FailureDigest): raw
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
		if s.lastSeen < limit && !s.leaseValid(nowNs) && (s.state != StateWaiting || s.extra == nil || (!s.extra.lease.active && !s.waitHeld())) {
			sh.tab.removeSession(e, s)
			e.stats.Expired.Add(1)
			e.stats.Sessions.Add(-1)
			return
		}
		oldest = min(oldest, s.lastSeen)
		leaseEnded := s.state == StateWaiting && !s.leaseValid(nowNs) && s.waitCovered(nowNs) == nil
		backstop := e.cfg.Backstop.MaxDuration > 0 && s.firstSeen > 0 && nowNs-s.firstSeen >= int64(e.cfg.Backstop.MaxDuration) && (s.extra == nil || !s.extra.loop.backstop)
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
// sessionTable.history) and its token count. Being seen writes one time
// into the session, whose line the look-up has just read: there is no
// recency list to reorder. The token count, like the history, is found
// from the position, so its line is fetched with the session's.
func (sh *shard) get(e *Engine, key string, h uint64, now int64) (s *session, hist []record, tokens int64) {
	t := &sh.tab
	s, p := t.find(key, h)
	if s == nil {
		e.admit(sh, now)
		s, p = t.add(key, h, now)
	}
	tokens = t.usageAt(p).tokens
	s.lastSeen = now
	t.oldestSeen = min(t.oldestSeen, now) // lower only when the caller's clock went back
	return s, t.history(p, s), tokens
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
		// never wait on a lock (they only try others'), so one is free
		// again shortly. Or the shard's sessions were not met by a sweep
		// that saw only free positions: the next goes on.
		runtime.Gosched()
	}
}

func eventID(keyHash uint64, seq int64) string {
	return "ld_" + strconv.FormatUint(keyHash, 16) + "_" + strconv.FormatInt(seq, 10)
}
