package limit

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func redisFor(t *testing.T, backend string) redis.UniversalClient {
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
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("real Redis at %s: %v", url, err)
	}
	return rc
}

func newTestRedis(t *testing.T, backend string, n int, ttl time.Duration) *Redis {
	t.Helper()
	rc := redisFor(t, backend)
	prefix := fmt.Sprintf("realm-test:%s:%d", t.Name(), time.Now().UnixNano())
	r := NewRedis(rc, n, RedisOptions{Prefix: prefix, TTL: ttl, Poll: 5 * time.Millisecond})
	t.Cleanup(func() { rc.Del(context.Background(), r.keys()...) })
	return r
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRedisLimitQueuesPastTheLimitAndServesInArrivalOrder(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			r := newTestRedis(t, backend, 2, 10*time.Second)
			a, err := r.Acquire(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.Acquire(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			// Two waiters: each learns its place, then gets a slot in turn.
			order := make(chan string, 2)
			positions := make(chan int, 2)
			for i, name := range []string{"first", "second"} {
				go func() {
					rel, err := r.Acquire(ctx(t), func(ahead int) { positions <- ahead })
					if err != nil {
						order <- "error: " + err.Error()
						return
					}
					order <- name
					rel.Release()
				}()
				if p := <-positions; p != i+1 {
					t.Errorf("%s waiter's position = %d, want %d", name, p, i+1)
				}
			}
			if n, _ := r.Holders(ctx(t)); n != 2 {
				t.Errorf("holders while full = %d, want 2", n)
			}
			a.Release()
			if got := <-order; got != "first" {
				t.Errorf("first slot went to %q", got)
			}
			b.Release()
			if got := <-order; got != "second" {
				t.Errorf("second slot went to %q", got)
			}
		})
	}
}

func TestRedisLimitFreesTheSlotOfACrashedHolder(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			r := newTestRedis(t, backend, 1, time.Hour)
			// A holder that crashed: its lease is in Redis, nobody renews it,
			// and its expiry has passed.
			k := r.keys()
			if err := r.rc.ZAdd(ctx(t), k[0], redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "dead"}).Err(); err != nil {
				t.Fatal(err)
			}
			rel, err := r.Acquire(ctx(t), func(int) { t.Error("queued behind an expired lease") })
			if err != nil {
				t.Fatal(err)
			}
			rel.Release()
			if n, _ := r.rc.ZCard(ctx(t), k[0]).Result(); n != 0 {
				t.Errorf("holders after release = %d, want 0", n)
			}
		})
	}
}

func TestRedisLimitRenewsALiveLease(t *testing.T) {
	t.Parallel()
	// A TTL long enough that a renewal (every third of it) is not late on
	// a loaded machine.
	r := newTestRedis(t, "miniredis", 1, 300*time.Millisecond)
	rel, err := r.Acquire(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Release()
	// Well past one TTL the lease is still held, because it is renewed.
	var queued atomic.Bool
	c, cancel := context.WithTimeout(ctx(t), 1200*time.Millisecond)
	defer cancel()
	if _, err := r.Acquire(c, func(int) { queued.Store(true) }); err == nil {
		t.Fatal("a second drive got the only slot while the first still held it")
	}
	if !queued.Load() {
		t.Error("the second drive was not queued")
	}
}

func TestLocalLimitQueuesPastTheLimit(t *testing.T) {
	t.Parallel()
	l := NewLocal(1)
	rel, err := l.Acquire(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		r2, err := l.Acquire(ctx(t), func(ahead int) { got <- ahead })
		if err == nil {
			r2.Release()
		}
		close(done)
	}()
	if p := <-got; p != 1 {
		t.Errorf("position = %d, want 1", p)
	}
	rel.Release()
	rel.Release() // a second release is harmless
	<-done
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	if r3, err := l.Acquire(c, nil); err != nil {
		t.Errorf("a free slot refused: %v", err)
	} else {
		r3.Release()
	}
}

// A slot whose lease is gone (it ran out while its holder could not renew,
// and another drive may take it) is reported lost, so the holder stops
// calling models instead of running past the limit.
func TestRedisLimitReportsALostLease(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			r := newTestRedis(t, backend, 1, 90*time.Millisecond)
			s, err := r.Acquire(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()
			select {
			case <-s.Lost():
				t.Fatal("a renewed lease was reported lost")
			case <-time.After(200 * time.Millisecond):
			}
			// The lease disappears, as when it expired and another
			// acquirer dropped it.
			if err := r.rc.Del(ctx(t), r.keys()[0]).Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-s.Lost():
			case <-time.After(2 * time.Second):
				t.Fatal("a lease that is gone was never reported lost")
			}
		})
	}
}
