// Package dedup keeps one record per webhook delivery id, for its trigger's
// TTL (listen spec §8): whether the delivery's run was handed off to its
// driver, and who is handing it off now. Redis is the store every replica
// shares; Memory is one process's own.
//
// A record goes new → in progress (a request's claim, with a lease) →
// handed off; a hand-off that does not complete releases the claim to
// received, and a claim whose lease lapsed (its listener died) counts as
// received too, so the next copy of the delivery claims it and hands the
// same run off again. Only a handed-off record is a duplicate.
package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// State is what a delivery's record says.
type State int

const (
	// New: no record (never seen, or forgotten after its TTL).
	New State = iota
	// Received: seen, but its run was not handed off (the hand-off failed,
	// or the claim of the request trying it lapsed).
	Received
	// InProgress: another request holds a live claim and is handing off.
	InProgress
	// HandedOff: the delivery's run was handed off.
	HandedOff
)

func (s State) String() string {
	switch s {
	case New:
		return "new"
	case Received:
		return "received"
	case InProgress:
		return "in_progress"
	case HandedOff:
		return "handed_off"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Store keeps delivery records per workflow. Every method is one atomic
// step on one record.
type Store interface {
	// Claim takes the delivery for one hand-off, held by token until lease
	// passes, when no live claim holds it and its run was not handed off.
	// It returns the state it found: New or Received (now claimed by
	// token), InProgress or HandedOff (not claimed). The record is kept
	// for ttl (at least the lease).
	Claim(ctx context.Context, workflowID, id, token string, lease, ttl time.Duration) (State, error)
	// HandedOff records that the delivery's run was handed off, for ttl.
	HandedOff(ctx context.Context, workflowID, id string, ttl time.Duration) error
	// Release gives token's claim up after a hand-off that did not
	// complete: the record says Received, for ttl. A record not claimed
	// by token is left as it is.
	Release(ctx context.Context, workflowID, id, token string, ttl time.Duration) error
	// Remember records a verified request's replay key for window and
	// reports whether it was new; a key already remembered is a replay.
	// Kept apart from the delivery records: one is what a signature
	// proves, the other what an event's own id says.
	Remember(ctx context.Context, workflowID, key string, window time.Duration) (bool, error)
	// Forget drops a replay key, so the sender's retry of a request
	// answered with a server error is not taken for a replay.
	Forget(ctx context.Context, workflowID, key string) error
}

// key names an id without storing it: ids come from senders and may be
// long or hold any byte.
func key(workflowID, id string) string {
	sum := sha256.Sum256([]byte(id))
	return workflowID + ":" + hex.EncodeToString(sum[:16])
}

// Memory is a process-local Store: every replica, and every restart, has
// its own. Expired records are dropped as the map is written.
type Memory struct {
	mu     sync.Mutex
	recs   map[string]memRecord
	now    func() time.Time
	writes int
}

type memRecord struct {
	state      State // Received, InProgress or HandedOff
	token      string
	leaseUntil time.Time
	until      time.Time
}

// NewMemory returns an empty Memory store; now nil is time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{recs: map[string]memRecord{}, now: now}
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, workflowID, id, token string, lease, ttl time.Duration) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := key(workflowID, id)
	prior := New
	if r, ok := m.recs[k]; ok && now.Before(r.until) {
		switch {
		case r.state == HandedOff:
			return HandedOff, nil
		case r.state == InProgress && now.Before(r.leaseUntil):
			return InProgress, nil
		}
		prior = Received
	}
	m.put(k, memRecord{state: InProgress, token: token, leaseUntil: now.Add(lease), until: now.Add(max(ttl, lease))}, now)
	return prior, nil
}

// HandedOff implements Store.
func (m *Memory) HandedOff(_ context.Context, workflowID, id string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.put(key(workflowID, id), memRecord{state: HandedOff, until: now.Add(ttl)}, now)
	return nil
}

// Release implements Store.
func (m *Memory) Release(_ context.Context, workflowID, id, token string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := key(workflowID, id)
	if r, ok := m.recs[k]; ok && r.state == InProgress && r.token == token {
		m.put(k, memRecord{state: Received, until: now.Add(ttl)}, now)
	}
	return nil
}

// Remember implements Store.
func (m *Memory) Remember(_ context.Context, workflowID, key string, window time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := replayKey(workflowID, key)
	if r, ok := m.recs[k]; ok && now.Before(r.until) {
		return false, nil
	}
	m.put(k, memRecord{state: HandedOff, until: now.Add(window)}, now)
	return true, nil
}

// Forget implements Store.
func (m *Memory) Forget(_ context.Context, workflowID, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, replayKey(workflowID, key))
	return nil
}

// replayKey names a replay key apart from every delivery record.
func replayKey(workflowID, k string) string { return "replay:" + key(workflowID, k) }

func (m *Memory) put(k string, r memRecord, now time.Time) {
	m.recs[k] = r
	m.writes++
	if m.writes%1024 == 0 { // amortised sweep keeps the map to live records
		for k, r := range m.recs {
			if !now.Before(r.until) {
				delete(m.recs, k)
			}
		}
	}
}

// Redis keeps each record as one key with a TTL, so every replica sharing
// the Redis agrees and Redis itself forgets them. The value is
// `handed_off`, `received` or `claim:<token>:<lease end, Unix ms>`; `1`
// (what earlier versions wrote once a run was handed off) reads as
// handed off. Each method is one command or one script on one key.
type Redis struct {
	rc     redis.UniversalClient
	prefix string
	// Now is the clock leases are measured on (nil: time.Now).
	Now func() time.Time
}

// DefaultRedisPrefix is where records live unless told otherwise:
// <prefix>:<workflow id>:<first 32 hex of sha256(id)>.
const DefaultRedisPrefix = "realm:listen:dedup"

// NewRedis returns a Store over rc; prefix "" is DefaultRedisPrefix.
func NewRedis(rc redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &Redis{rc: rc, prefix: prefix}
}

// claimScript: KEYS[1] the record; ARGV token, now (ms), lease end (ms),
// key TTL (ms). Returns the state found.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local prior = 'new'
if v then
  if v == 'received' then
    prior = 'received'
  elseif string.sub(v, 1, 6) == 'claim:' then
    local lease = tonumber(string.match(v, ':(%d+)$'))
    if lease and lease > tonumber(ARGV[2]) then return 'in_progress' end
    prior = 'received'
  else
    return 'handed_off'
  end
end
redis.call('SET', KEYS[1], 'claim:' .. ARGV[1] .. ':' .. ARGV[3], 'PX', ARGV[4])
return prior
`)

// releaseScript: KEYS[1] the record; ARGV token, key TTL (ms).
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local mine = 'claim:' .. ARGV[1] .. ':'
if v and string.sub(v, 1, #mine) == mine then
  redis.call('SET', KEYS[1], 'received', 'PX', ARGV[2])
  return 1
end
return 0
`)

func (r *Redis) key(workflowID, id string) string { return r.prefix + ":" + key(workflowID, id) }

// Claim implements Store. The lease is measured on the listeners' clocks.
func (r *Redis) Claim(ctx context.Context, workflowID, id, token string, lease, ttl time.Duration) (State, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	got, err := claimScript.Run(ctx, r.rc, []string{r.key(workflowID, id)},
		token, now.UnixMilli(), now.Add(lease).UnixMilli(), max(ttl, lease).Milliseconds()).Text()
	if err != nil {
		return New, err
	}
	switch got {
	case "new":
		return New, nil
	case "received":
		return Received, nil
	case "in_progress":
		return InProgress, nil
	case "handed_off":
		return HandedOff, nil
	}
	return New, fmt.Errorf("dedup: unexpected claim reply %q", got)
}

// HandedOff implements Store.
func (r *Redis) HandedOff(ctx context.Context, workflowID, id string, ttl time.Duration) error {
	return r.rc.Set(ctx, r.key(workflowID, id), "handed_off", ttl).Err()
}

// Remember implements Store: one SET NX with the window as its TTL.
func (r *Redis) Remember(ctx context.Context, workflowID, key string, window time.Duration) (bool, error) {
	return r.rc.SetNX(ctx, r.prefix+":"+replayKey(workflowID, key), "1", window).Result()
}

// Forget implements Store.
func (r *Redis) Forget(ctx context.Context, workflowID, key string) error {
	return r.rc.Del(ctx, r.prefix+":"+replayKey(workflowID, key)).Err()
}

// Release implements Store.
func (r *Redis) Release(ctx context.Context, workflowID, id, token string, ttl time.Duration) error {
	return releaseScript.Run(ctx, r.rc, []string{r.key(workflowID, id)}, token, ttl.Milliseconds()).Err()
}
