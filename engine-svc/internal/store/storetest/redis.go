package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisURL is where tests look for a real Redis when $REDIS_URL is unset.
const DefaultRedisURL = "redis://127.0.0.1:6379"

// RedisURL returns $REDIS_URL or DefaultRedisURL.
func RedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

// ConnectRedis connects to the real Redis at RedisURL. An unreachable Redis
// fails the test, never skips it: the real-Redis tests are part of the
// suite and CI starts redis-server for them. The client is closed when the
// test ends.
func ConnectRedis(tb testing.TB) *redis.Client {
	tb.Helper()
	url := RedisURL()
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("REDIS_URL %q: %v", url, err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		tb.Fatalf("real Redis unreachable at %s (%v): start redis-server (e.g. `redis-server --daemonize yes`) or set REDIS_URL; CI starts it", url, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// UniquePrefix returns a key prefix no other test shares, so parallel tests
// and leftovers of crashed runs never collide.
func UniquePrefix(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "realmtest-" + hex.EncodeToString(b[:])
}

// CleanupPrefix deletes every key under prefix (SCAN + DEL) when the test
// ends. It uses its own connection, since the test may close its client
// first.
func CleanupPrefix(tb testing.TB, prefix string) {
	tb.Helper()
	tb.Cleanup(func() {
		opts, err := redis.ParseURL(RedisURL())
		if err != nil {
			tb.Errorf("cleanup %s: %v", prefix, err)
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		if err := DeletePrefix(context.Background(), c, prefix); err != nil {
			tb.Errorf("cleanup %s: %v", prefix, err)
		}
	})
}

// DeletePrefix removes every key under prefix with SCAN + DEL.
func DeletePrefix(ctx context.Context, c redis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+":*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
