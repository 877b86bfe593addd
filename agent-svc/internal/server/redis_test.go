package server_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// redisFor is the real Redis at $REDIS_URL (default 127.0.0.1:6379; not
// reachable fails the test) or a miniredis.
func redisFor(t testing.TB, backend string) redis.UniversalClient {
	t.Helper()
	if backend == "miniredis" {
		m := miniredis.RunT(t)
		return redis.NewClient(&redis.Options{Addr: m.Addr()})
	}
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		t.Fatalf("real Redis at %s: %v", url, err)
	}
	return rc
}
