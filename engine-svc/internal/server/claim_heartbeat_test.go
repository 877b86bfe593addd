package server_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const fastAndSlow = `id: fast_slow
name: Fast and slow
version: 1
steps:
  fast:
    description: Answers at once.
    execution: auto
    handler: fast
  slow:
    description: Takes its time.
    execution: auto
    handler: slow
`

// Parallel branches of different speeds: the fast step's outcome is
// recorded as soon as it finishes (a crash now would not run it again),
// and the slow one's claim is renewed while it runs, so it never goes
// stale however long it takes.
func TestClaimsOfRunningStepsAreRenewedUntilRecorded(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	const window = 300 * time.Millisecond
	b := replicaOf(t, a, engine.Options{Clock: a.clock.Now, ClaimWindow: window, LeaseRenewEvery: 20 * time.Millisecond})
	var fast, slow atomic.Int64
	release := make(chan struct{})
	startRunner(t, a, map[string]handlerFunc{
		"fast": okHandler(t, &fast),
		"slow": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			slow.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"slow": true})}, nil
		},
	})
	a.register(t, []byte(fastAndSlow))
	done := make(chan *realmv1.Reply, 1)
	go func() {
		resp, err := b.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "fast_slow"})
		if err != nil {
			t.Error(err)
		}
		done <- resp.GetReply()
	}()
	for i := 0; fast.Load()+slow.Load() < 2 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * window) // the first deadlines are long past
	stale, err := a.st.Due(ctx(t), store.IndexClaims, float64(a.clock.Now().UnixMilli()), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 0 {
		t.Errorf("claims past their deadline while their steps run: %v", stale)
	}
	list, _ := a.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "fast_slow"})
	if len(list.GetRuns()) != 1 {
		t.Fatalf("runs = %v", list.GetRuns())
	}
	doc := loadDoc(t, a, list.GetRuns()[0].GetRunId())
	if c := doc.Claims["slow"]; c == nil || c.Deadline == nil || !record.ParseTime(*c.Deadline).After(a.clock.Now()) {
		t.Errorf("slow's claim %+v is not live", c)
	}
	if !slices.Contains(doc.CompletedSteps, "fast") || doc.Claims["fast"] != nil {
		t.Errorf("while slow runs, fast is not recorded: completed %v, claim %+v", doc.CompletedSteps, doc.Claims["fast"])
	}
	close(release)
	r := <-done
	if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || fast.Load() != 1 || slow.Load() != 1 {
		t.Fatalf("run %v; fast ran %d times, slow %d", r.GetRunPhase(), fast.Load(), slow.Load())
	}
}
