package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/pkg/ratelimit"
)

// redisFor is the Redis at $REDIS_URL (what CI and `make test` run), else
// a miniredis of the test's own.
func redisFor(t *testing.T) redis.UniversalClient {
	t.Helper()
	var rc *redis.Client
	if u := strings.TrimSpace(os.Getenv("REDIS_URL")); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		rc = redis.NewClient(opt)
	} else {
		rc = redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	}
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// prefix is a key prefix of the test's own on a shared Redis.
func prefix(t *testing.T) string {
	return fmt.Sprintf("test:rate:%s:%d", t.Name(), time.Now().UnixNano())
}

// The rates are slow enough (one request in 1000 s) that no token comes
// back during the test, however loaded the machine: what is served is
// the burst, exactly.
func TestABucketServesItsBurstThenSaysHowLongToWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		perSecond float64
		burst     int
		served    int
		wait      time.Duration // at least, for the first refusal
	}{
		{"burst three", 0.001, 3, 3, 999 * time.Second},
		{"burst zero serves one", 0.001, 0, 1, 999 * time.Second},
		{"burst one", 0.01, 1, 1, 99 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := ratelimit.NewRedis(redisFor(t), prefix(t))
			served := 0
			var firstWait time.Duration
			for range tc.served + 3 {
				d, err := b.Take(context.Background(), "/hook", tc.perSecond, tc.burst)
				if err != nil {
					t.Fatal(err)
				}
				if d == 0 {
					served++
				} else if firstWait == 0 {
					firstWait = d
				}
			}
			if served != tc.served || firstWait < tc.wait {
				t.Errorf("served %d, first wait %s; want %d and at least %s", served, firstWait, tc.served, tc.wait)
			}
		})
	}
}

// Two listeners' clients on one Redis draw on one bucket per name, and
// one bucket's refusals leave another's alone.
func TestClientsSharingARedisShareEachBucket(t *testing.T) {
	t.Parallel()
	rc := redisFor(t)
	p := prefix(t)
	a, b := ratelimit.NewRedis(rc, p), ratelimit.NewRedis(rc, p)
	served := map[string]int{}
	for i := range 10 {
		for _, name := range []string{"/one", "/two"} {
			d, err := []*ratelimit.Redis{a, b}[i%2].Take(context.Background(), name, 0.001, 4)
			if err != nil {
				t.Fatal(err)
			}
			if d == 0 {
				served[name]++
			}
		}
	}
	if served["/one"] != 4 || served["/two"] != 4 {
		t.Errorf("served %v, want 4 of each", served)
	}
}

func TestARefusedLimitIsAnError(t *testing.T) {
	t.Parallel()
	b := ratelimit.NewRedis(redisFor(t), prefix(t))
	if _, err := b.Take(context.Background(), "/x", 0, 1); err == nil {
		t.Error("per_second 0 taken, want an error")
	}
}
