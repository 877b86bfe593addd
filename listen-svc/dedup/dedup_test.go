package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/listen-svc/dedup"
)

func TestAnIDIsSeenUntilItsTTLPassesAndOnlyForItsWorkflow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	mem := dedup.NewMemory(func() time.Time { return now })
	mr := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rc.Close() })
	stores := map[string]struct {
		s       dedup.Store
		advance func(time.Duration)
	}{
		"memory": {mem, func(d time.Duration) { now = now.Add(d) }},
		"redis":  {dedup.NewRedis(rc, "test"), mr.FastForward},
	}
	ctx := context.Background()
	for name, st := range stores {
		if seen, err := st.s.Seen(ctx, "wf", "102"); err != nil || seen {
			t.Fatalf("%s: fresh id seen=%v err=%v", name, seen, err)
		}
		if err := st.s.Remember(ctx, "wf", "102", 5*time.Minute); err != nil {
			t.Fatal(err)
		}
		if seen, _ := st.s.Seen(ctx, "wf", "102"); !seen {
			t.Errorf("%s: remembered id not seen", name)
		}
		if seen, _ := st.s.Seen(ctx, "other", "102"); seen {
			t.Errorf("%s: the id leaked to another workflow", name)
		}
		st.advance(5*time.Minute + time.Second)
		if seen, _ := st.s.Seen(ctx, "wf", "102"); seen {
			t.Errorf("%s: id still seen after its TTL", name)
		}
	}
}
