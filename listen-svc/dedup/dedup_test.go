package dedup_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/listen-svc/dedup"
)

const (
	lease = 30 * time.Second
	ttl   = 5 * time.Minute
)

type backend struct {
	s       dedup.Store
	advance func(time.Duration)
}

// backends are a Memory store and a Redis store over miniredis, each on a
// clock the test moves.
func backends(t *testing.T) map[string]backend {
	memNow := time.Unix(1_800_000_000, 0)
	mem := dedup.NewMemory(func() time.Time { return memNow })
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	redisNow := time.Now()
	rs := dedup.NewRedis(rc, "test")
	rs.Now = func() time.Time { return redisNow }
	return map[string]backend{
		"memory": {mem, func(d time.Duration) { memNow = memNow.Add(d) }},
		"redis":  {rs, func(d time.Duration) { redisNow = redisNow.Add(d); mr.FastForward(d) }},
	}
}

func TestARecordGoesFromClaimedToHandedOffAndIsForgottenAfterItsTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, b := range backends(t) {
		claim := func(token string, want dedup.State) {
			t.Helper()
			if got, err := b.s.Claim(ctx, "wf", "102", token, lease, ttl); err != nil || got != want {
				t.Fatalf("%s: claim by %s: %v %v, want %v", name, token, got, err, want)
			}
		}
		claim("a", dedup.New)
		claim("b", dedup.InProgress) // a holds it
		if got, _ := b.s.Claim(ctx, "other", "102", "c", lease, ttl); got != dedup.New {
			t.Errorf("%s: the id leaked to another workflow: %v", name, got)
		}
		if err := b.s.HandedOff(ctx, "wf", "102", ttl); err != nil {
			t.Fatal(err)
		}
		claim("b", dedup.HandedOff)
		b.advance(ttl + time.Second)
		claim("d", dedup.New)
	}
}

func TestAReleasedOrLapsedClaimIsReceivedAndClaimedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, b := range backends(t) {
		claim := func(token string, want dedup.State) {
			t.Helper()
			if got, err := b.s.Claim(ctx, "wf", "7", token, lease, ttl); err != nil || got != want {
				t.Fatalf("%s: claim by %s: %v %v, want %v", name, token, got, err, want)
			}
		}
		claim("a", dedup.New)
		// Only the holder's release counts.
		if err := b.s.Release(ctx, "wf", "7", "b", ttl); err != nil {
			t.Fatal(err)
		}
		claim("b", dedup.InProgress)
		if err := b.s.Release(ctx, "wf", "7", "a", ttl); err != nil {
			t.Fatal(err)
		}
		claim("b", dedup.Received)
		// b's listener dies: its claim holds until the lease passes.
		b.advance(lease - time.Second)
		claim("c", dedup.InProgress)
		b.advance(2 * time.Second)
		claim("c", dedup.Received)
		// A release by the lapsed holder does not undo c's claim.
		if err := b.s.Release(ctx, "wf", "7", "b", ttl); err != nil {
			t.Fatal(err)
		}
		claim("d", dedup.InProgress)
	}
}

// TestConcurrentClaimsHaveOneWinner claims one delivery from twenty
// goroutines, on every store: exactly one holds it.
func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	t.Parallel()
	stores := map[string]dedup.Store{}
	for name, b := range backends(t) {
		stores[name] = b.s
	}
	if u := strings.TrimSpace(os.Getenv("REDIS_URL")); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		rc := redis.NewClient(opt)
		t.Cleanup(func() { rc.Close() })
		stores["real redis"] = dedup.NewRedis(rc, fmt.Sprintf("test:dedup:%d", time.Now().UnixNano()))
	}
	for name, s := range stores {
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[dedup.State]int{}
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := s.Claim(context.Background(), "wf", "race", fmt.Sprint("t", i), lease, ttl)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				got[st]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if got[dedup.New] != 1 || got[dedup.InProgress] != 19 {
			t.Errorf("%s: claims %v, want one new and nineteen in progress", name, got)
		}
	}
}

func TestAReplayKeyIsRefusedWithinItsWindowForgottenAfterAndApartFromDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, b := range backends(t) {
		remember := func(key string, want bool) {
			t.Helper()
			got, err := b.s.Remember(ctx, "wf", key, 10*time.Minute)
			if err != nil || got != want {
				t.Fatalf("%s: Remember(%s) = %v %v, want %v", name, key, got, err, want)
			}
		}
		remember("sig-1", true)
		remember("sig-1", false)
		// A delivery id that happens to equal a replay key is another record.
		if st, err := b.s.Claim(ctx, "wf", "sig-1", "tok", lease, ttl); err != nil || st != dedup.New {
			t.Fatalf("%s: delivery record = %v %v, want new", name, st, err)
		}
		if err := b.s.Forget(ctx, "wf", "sig-1"); err != nil {
			t.Fatal(err)
		}
		remember("sig-1", true)
		b.advance(11 * time.Minute)
		remember("sig-1", true)
	}
}
