package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// interleavingStore is the real store with a hook that runs once, just
// before the first delete reaches Redis: another caller's act landing
// between a purge's read and its delete.
type interleavingStore struct {
	*store.Redis
	once   sync.Once
	before func()
}

func (s *interleavingStore) DeleteRun(ctx context.Context, runID, key string, expect int64) error {
	s.once.Do(s.before)
	return s.Redis.DeleteRun(ctx, runID, key, expect)
}

// A purge decided on a failed run does not delete it when the run was
// resumed in between: the delete is refused at the version it read, the
// purge decides again, and refuses the run that is now running.
func TestPurgeDoesNotDeleteARunResumedUnderIt(t *testing.T) {
	t.Parallel()
	rc, prefix := realRedis(t)
	st := &interleavingStore{Redis: store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16})}
	e := engineOn(t, st, rc, prefix)

	e.register(t, []byte("id: once\nname: Once\nversion: 1\nsteps:\n  ask:\n    description: Ask.\n    execution: agent\n    validation_exhaustion: { threshold: 1 }\n    output_schema:\n      type: object\n      required: [ok]\n      properties:\n        ok: { type: boolean }\n"))
	run := start(t, e, "once", nil).GetRunId()
	if r := step(t, e, run, "ask", map[string]any{"ok": "no"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED {
		t.Fatalf("the run should have failed: %v", r)
	}
	var resumed *realmv1.Reply
	st.before = func() {
		resp, err := e.client.ResumeRun(ctx(t), &realmv1.ResumeRunRequest{RunId: run, FromStep: "ask"})
		if err != nil {
			t.Error(err)
			return
		}
		resumed = resp.GetReply()
	}
	resp, err := e.client.PurgeRun(ctx(t), &realmv1.PurgeRunRequest{RunId: run, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Fatalf("the resume in between = %v", resumed)
	}
	if resp.GetPurged() || resp.GetRefusal() != realmv1.PurgeRefusal_PURGE_REFUSAL_NOT_TERMINAL {
		t.Fatalf("purge = %v, want refused: the run is running again", resp)
	}
	if s := state(t, e, run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Fatalf("after the refused purge the run is %v, want running", s.GetRunPhase())
	}
}
