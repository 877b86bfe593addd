package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const sweptSteps = `id: swept
name: Swept
version: 1
steps:
  work:
    description: Idempotent work.
    execution: auto
    handler: work
    idempotent: true
`

const sweptFinalizer = `  tidy:
    description: Cleans up.
    execution: finalizer
    handler: tidy
    on_outcome: [complete, fail]
`

// A claim whose engine stopped renewing it (the process died with the
// call in flight) is recovered by another engine's sweeper when the step
// is declared idempotent: the claim is freed and the step runs again, on a
// live runner, with no operator command; the record holds one outcome.
// A step not declared idempotent keeps its stale claim for an operator.
func TestTheSweeperRecoversStaleClaimsOfIdempotentSteps(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	// b's claims last 200 ms and are never renewed within the test: it
	// behaves as an engine that died while its handler call was in flight.
	b := replicaOf(t, a, engine.Options{Clock: a.clock.Now, ClaimWindow: 200 * time.Millisecond, LeaseRenewEvery: time.Hour})
	var calls atomic.Int64
	// The handler reads the current release channel under the race
	// detector's eye: gRPC replies order nothing for it.
	var release atomic.Pointer[chan struct{}]
	startRunner(t, a, map[string]handlerFunc{
		"tidy": okHandler(t, new(atomic.Int64)),
		"work": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			if calls.Add(1) == 1 { // the first call hangs, as with a dead engine
				select {
				case <-*release.Load():
				case <-ctx.Done():
				}
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"done": true})}, nil
		},
	})
	a.register(t, []byte(sweptSteps))
	a.register(t, []byte(strings.ReplaceAll(sweptSteps, "id: swept", "id: swept_fin")+sweptFinalizer))
	a.register(t, []byte(strings.ReplaceAll(strings.ReplaceAll(sweptSteps, "idempotent: true", "idempotent: false"), "id: swept", "id: kept")))
	// With finalizers or without, an idempotent step's claim has a
	// deadline, and the sweeper recovers it.
	for _, wf := range []string{"swept", "swept_fin"} {
		calls.Store(0)
		rel := make(chan struct{})
		release.Store(&rel)
		firstDone := make(chan struct{})
		go func() {
			defer close(firstDone)
			_, _ = b.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: wf})
		}()
		for i := 0; calls.Load() == 0 && i < 500; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		list, _ := a.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: wf})
		if len(list.GetRuns()) != 1 {
			t.Fatalf("%s: runs = %v", wf, list.GetRuns())
		}
		run := list.GetRuns()[0].GetRunId()
		time.Sleep(300 * time.Millisecond) // the claim is stale now

		freed, err := a.eng.SweepClaims(context.Background(), 10)
		if err != nil || freed != 1 {
			t.Fatalf("%s: sweep freed %d, %v; want 1", wf, freed, err)
		}
		var s *realmv1.RunState
		for i := 0; i < 500; i++ {
			if s = state(t, a, run); s.GetRunPhase() == realmv1.RunPhase_RUN_PHASE_COMPLETED {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || calls.Load() != 2 {
			t.Fatalf("%s: after the sweep the run is %v with %d calls; want completed by a second call", wf, s.GetRunPhase(), calls.Load())
		}
		close(rel) // the dead engine's call comes back: its claim is gone
		<-firstDone
		ev, err := a.st.Evidence(ctx(t), run, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		outcomes := 0
		for _, raw := range ev {
			var e struct {
				StepID string `json:"step_id"`
				Status string `json:"status"`
				Kind   string `json:"kind"`
			}
			_ = json.Unmarshal(raw, &e)
			if e.StepID == "work" && e.Status == "success" && e.Kind == "" {
				outcomes++
			}
		}
		if outcomes != 1 {
			t.Errorf("%s: the record holds %d outcomes of 'work', want 1:\n%s", wf, outcomes, ev)
		}
	}

	// Not idempotent: the stale claim stays for an operator.
	release2 := make(chan struct{})
	release.Store(&release2)
	calls.Store(0)
	keptDone := make(chan struct{})
	go func() {
		defer close(keptDone)
		_, _ = b.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "kept"})
	}()
	for i := 0; calls.Load() == 0 && i < 500; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if freed, err := a.eng.SweepClaims(context.Background(), 10); err != nil || freed != 0 {
		t.Errorf("sweep of a step not declared idempotent freed %d, %v; want 0", freed, err)
	}
	close(release2)
	<-keptDone
}
