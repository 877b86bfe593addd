package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Gates past their time with nothing to carry out (no on_expiry) never
// starve the sweeper: they are not in its index, and entries an older
// engine left there (or a run deleted by hand left) are cleared as they
// come up, so a gate that must abort is carried out although stale
// entries are older than it.
func TestGatesWithNothingToCarryOutDoNotStarveTheSweeper(t *testing.T) {
	t.Parallel()
	// One bucket: the sweeper's scan of the index is one list, oldest
	// first, as in any bucket of a larger store.
	rc, prefix := realRedis(t)
	e := engineOn(t, store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 1}), rc, prefix)
	registerFile(t, e, "health_gated_no_expiry.yaml")
	registerFile(t, e, "expiring_abort.yaml")
	var idle []string
	for range 3 {
		idle = append(idle, start(t, e, "gated_open", nil).GetRunId())
	}
	e.clock.Advance(time.Second)
	due := start(t, e, "expiring_abort", nil).GetRunId()
	e.clock.Advance(2 * time.Minute)

	// New writes keep the idle gates out of the sweeper's index.
	if n, err := e.eng.SweepExpired(context.Background(), 2); err != nil || n != 1 {
		t.Fatalf("first sweep carried out %d, %v; want the due gate (1)", n, err)
	}
	if s := state(t, e, due); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
		t.Fatalf("the due gate's run is %v, want aborted", s.GetRunPhase())
	}

	// Entries such as an older engine wrote: the idle runs in the
	// sweeper's index, older than a due gate.
	late := start(t, e, "expiring_abort", nil).GetRunId()
	e.clock.Advance(2 * time.Minute)
	for i, id := range idle {
		key := e.st.IndexKey(e.st.BucketOf(id), store.IndexExpiries)
		if err := e.rc.ZAdd(ctx(t), key, redis.Z{Score: float64(i + 1), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// And the entry of a run that is gone (deleted by hand).
	ghost := e.st.NewRunID("")
	if err := e.rc.ZAdd(ctx(t), e.st.IndexKey(e.st.BucketOf(ghost), store.IndexExpiries), redis.Z{Score: 0, Member: ghost}).Err(); err != nil {
		t.Fatal(err)
	}
	carried := 0
	for range 3 {
		n, err := e.eng.SweepExpired(context.Background(), 2)
		if err != nil {
			t.Fatal(err)
		}
		carried += n
	}
	if carried != 1 {
		t.Fatalf("three sweeps of 2 carried out %d gates, want the late one (1)", carried)
	}
	if s := state(t, e, late); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
		t.Fatalf("the late gate's run is %v, want aborted", s.GetRunPhase())
	}
	if err := e.rc.ZScore(ctx(t), e.st.IndexKey(e.st.BucketOf(ghost), store.IndexExpiries), ghost).Err(); err != redis.Nil {
		t.Errorf("the gone run's entry is still in the sweeper's index (%v)", err)
	}
	for _, id := range idle {
		s := state(t, e, id)
		wantStatus(t, s, "awaiting_human") // still waiting for an answer, untouched
		if n, _ := e.rc.ZScore(ctx(t), e.st.IndexKey(e.st.BucketOf(id), store.IndexExpiries), id).Result(); n != 0 {
			t.Errorf("run %s is still in the sweeper's index", id)
		}
	}
}
