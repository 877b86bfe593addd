package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// contendingStore is the real store with another writer: while armed, each
// commit of an existing run is preceded by a real write of that run by
// someone else, so the commit loses its race.
type contendingStore struct {
	*store.Redis
	armed atomic.Int32
}

func (s *contendingStore) CommitRun(ctx context.Context, c *store.Change) error {
	if c.ExpectVersion >= 0 && s.armed.Add(-1) >= 0 {
		if snap, err := s.Redis.LoadRun(ctx, c.RunID); err == nil {
			_ = s.Redis.CommitRun(ctx, &store.Change{RunID: c.RunID, ExpectVersion: snap.Version, NewVersion: snap.Version + 1, Doc: snap.Doc})
		}
	}
	return s.Redis.CommitRun(ctx, c)
}

// When every try to record a handler's result loses its race, the call
// says the result was not recorded and releases the claim in the same act,
// so the step can run again at once instead of waiting out its deadline.
func TestUnrecordableResultsReleaseTheirClaims(t *testing.T) {
	t.Parallel()
	rc, prefix := realRedis(t)
	st := &contendingStore{Redis: store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16})}
	e := engineOn(t, st, rc, prefix)
	var calls atomic.Int64
	startRunner(t, e, map[string]handlerFunc{
		"work": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			if calls.Add(1) == 1 {
				st.armed.Store(16) // every try of the first result's write loses
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"done": true})}, nil
		},
	})
	e.register(t, oneStep("work", ""))
	_, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "one_work"})
	msg := status.Convert(err).Message()
	if err == nil || !strings.Contains(msg, "The results of 'work' were not recorded; 1 claim(s) released") {
		t.Fatalf("start = %v, want the result said unrecorded and its claim released", err)
	}
	list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_work"})
	if len(list.GetRuns()) != 1 {
		t.Fatalf("runs = %v", list.GetRuns())
	}
	run := list.GetRuns()[0].GetRunId()
	if s := state(t, e, run); len(s.GetInProgressSteps()) != 0 {
		t.Fatalf("in progress after the release: %v", s.GetInProgressSteps())
	}
	if r := advance(t, e, run); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || calls.Load() != 2 {
		t.Fatalf("advance = %v after %d calls; want completed by a second call", r.GetRunPhase(), calls.Load())
	}
}
