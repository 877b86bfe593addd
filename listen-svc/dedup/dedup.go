// Package dedup remembers the delivery ids a webhook has already started a
// run for, each for its trigger's TTL (listen spec §8). Redis is the store
// every replica shares; Memory is one process's own.
package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store remembers delivery ids per workflow.
type Store interface {
	// Seen reports whether id was remembered for workflowID and has not
	// expired.
	Seen(ctx context.Context, workflowID, id string) (bool, error)
	// Remember keeps id for ttl.
	Remember(ctx context.Context, workflowID, id string, ttl time.Duration) error
}

// key names an id without storing it: ids come from senders and may be
// long or hold any byte.
func key(workflowID, id string) string {
	sum := sha256.Sum256([]byte(id))
	return workflowID + ":" + hex.EncodeToString(sum[:16])
}

// Memory is a process-local Store: every replica, and every restart, has
// its own. Expired ids are dropped as the map is written.
type Memory struct {
	mu     sync.Mutex
	until  map[string]time.Time
	now    func() time.Time
	writes int
}

// NewMemory returns an empty Memory store; now nil is time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{until: map[string]time.Time{}, now: now}
}

// Seen implements Store.
func (m *Memory) Seen(_ context.Context, workflowID, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.until[key(workflowID, id)]
	return ok && m.now().Before(t), nil
}

// Remember implements Store.
func (m *Memory) Remember(_ context.Context, workflowID, id string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.until[key(workflowID, id)] = now.Add(ttl)
	m.writes++
	if m.writes%1024 == 0 { // amortised sweep keeps the map to live ids
		for k, t := range m.until {
			if !now.Before(t) {
				delete(m.until, k)
			}
		}
	}
	return nil
}

// Redis keeps ids as keys with a TTL, so every replica sharing the Redis
// agrees and Redis itself forgets them.
type Redis struct {
	rc     redis.UniversalClient
	prefix string
}

// DefaultRedisPrefix is where ids live unless told otherwise:
// <prefix>:<workflow id>:<first 32 hex of sha256(id)>.
const DefaultRedisPrefix = "realm:listen:dedup"

// NewRedis returns a Store over rc; prefix "" is DefaultRedisPrefix.
func NewRedis(rc redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &Redis{rc: rc, prefix: prefix}
}

// Seen implements Store.
func (r *Redis) Seen(ctx context.Context, workflowID, id string) (bool, error) {
	n, err := r.rc.Exists(ctx, r.prefix+":"+key(workflowID, id)).Result()
	return n > 0, err
}

// Remember implements Store.
func (r *Redis) Remember(ctx context.Context, workflowID, id string, ttl time.Duration) error {
	return r.rc.Set(ctx, r.prefix+":"+key(workflowID, id), "1", ttl).Err()
}
