package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEvicting is returned by CheckEviction when a server may evict keys:
// a run evicted under memory pressure is lost without a trace.
var ErrEvicting = errors.New("store: Redis may evict keys")

// CheckEviction reads maxmemory-policy on the server (every master of a
// Cluster) and returns an error wrapping ErrEvicting, with the fix, unless
// it is noeviction. Any other error means the policy could not be read
// (CONFIG renamed away by a managed Redis, the server unreachable): the
// caller decides whether to go on.
func CheckEviction(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var bad []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			p, err := evictionPolicy(ctx, m)
			if err != nil {
				return fmt.Errorf("%s: %w", m.Options().Addr, err)
			}
			if p != "noeviction" {
				mu.Lock()
				bad = append(bad, m.Options().Addr+" has "+p)
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(bad) > 0 {
			return evictingError(strings.Join(bad, ", "))
		}
		return nil
	}
	p, err := evictionPolicy(ctx, c)
	if err != nil {
		return err
	}
	if p != "noeviction" {
		return evictingError("it has " + p)
	}
	return nil
}

func evictionPolicy(ctx context.Context, c redis.Cmdable) (string, error) {
	m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET maxmemory-policy: %w", err)
	}
	p, ok := m["maxmemory-policy"]
	if !ok {
		return "", errors.New("CONFIG GET maxmemory-policy: no value in the reply")
	}
	return p, nil
}

func evictingError(which string) error {
	return fmt.Errorf("%w: maxmemory-policy must be noeviction, but %s, which can drop run keys under memory pressure; "+
		"run `redis-cli CONFIG SET maxmemory-policy noeviction` (and `CONFIG REWRITE`, or set `maxmemory-policy noeviction` in redis.conf) on each server",
		ErrEvicting, which)
}
