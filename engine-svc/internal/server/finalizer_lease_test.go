package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/record"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A finalizer that runs longer than its lease keeps it: the drainer renews
// the lease while the handler runs, so a second drainer after the first
// lease would have passed finds it held and does not run the cleanup a
// second time at once.
func TestAFinalizerKeepsItsLeaseWhileItRuns(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	b := replicaOf(t, a, engine.Options{Clock: a.clock.Now, LeaseRenewEvery: 20 * time.Millisecond})
	var charges, audits, running atomic.Int64
	release := make(chan struct{})
	startRunner(t, a, map[string]handlerFunc{
		"charge": okHandler(t, &charges),
		"audit": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			audits.Add(1)
			if running.Add(1) > 1 {
				t.Error("the cleanup runs twice at once")
			}
			defer running.Add(-1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		},
	})
	a.register(t, []byte(withFinalizer))
	started := make(chan *realmv1.Reply, 1)
	go func() {
		resp, err := b.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "charged"})
		if err != nil {
			t.Error(err)
		}
		started <- resp.GetReply()
	}()
	run := awaitCleanup(t, a, &audits)
	// 40 s of the engines' clock pass in two steps, renewals in between:
	// the first lease (30 s) is long gone, the renewed one is not.
	a.clock.Advance(20 * time.Second)
	time.Sleep(200 * time.Millisecond)
	a.clock.Advance(20 * time.Second)
	time.Sleep(100 * time.Millisecond)
	drained, err := a.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if hint := drained.GetReply().GetContextHint(); !strings.Contains(hint, "has an active drain lease") {
		t.Errorf("second drainer: %q, want the lease held", hint)
	}
	close(release)
	r := <-started
	if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("start = %v", r)
	}
	if f := loadDoc(t, a, run).FinalizerLedger["audit"]; f == nil || f.Status != "completed" {
		t.Errorf("audit = %+v, want completed", f)
	}
	if n := audits.Load(); n != 1 {
		t.Errorf("the cleanup ran %d times, want once", n)
	}
}

// A finalizer whose drainer died (its lease is never renewed and runs out)
// is delivered by another engine's sweeper, with no operator command; the
// dead drainer's late answer is not recorded over it.
func TestTheSweeperDeliversCleanupWhoseDrainerDied(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	// b never renews its lease within the test: it behaves as an engine
	// that died while its finalizer call was in flight.
	b := replicaOf(t, a, engine.Options{Clock: a.clock.Now, LeaseRenewEvery: time.Hour})
	var charges, audits atomic.Int64
	release := make(chan struct{})
	startRunner(t, a, map[string]handlerFunc{
		"charge": okHandler(t, &charges),
		"audit": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			if audits.Add(1) == 1 { // the dead engine's call hangs
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"n": audits.Load()})}, nil
		},
	})
	a.register(t, []byte(withFinalizer))
	started := make(chan struct{})
	go func() {
		defer close(started)
		_, _ = b.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "charged"})
	}()
	run := awaitCleanup(t, a, &audits)
	if n, err := a.eng.SweepFinalizers(context.Background(), 10); err != nil || n != 0 {
		t.Fatalf("sweep while the lease holds started %d, %v; want 0", n, err)
	}
	a.clock.Advance(31 * time.Second) // the 30 s lease has run out
	if n, err := a.eng.SweepFinalizers(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("sweep after the lease ran out started %d, %v; want 1", n, err)
	}
	var f *record.FinalizerStatus
	for i := 0; i < 500; i++ {
		if f = loadDoc(t, a, run).FinalizerLedger["audit"]; f != nil && f.Status == "completed" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f == nil || f.Status != "completed" || audits.Load() != 2 {
		t.Fatalf("audit = %+v after %d calls; want completed by the sweeper's call", f, audits.Load())
	}
	close(release) // the dead engine's call comes back: superseded
	<-started
	if n, err := a.eng.SweepFinalizers(context.Background(), 10); err != nil || n != 0 {
		t.Errorf("sweep after the cleanup started %d, %v; want 0", n, err)
	}
	if got := loadDoc(t, a, run).FinalizerLedger["audit"]; got.Status != "completed" || got.LeaseToken != f.LeaseToken {
		t.Errorf("the late answer changed the ledger: %+v, was %+v", got, f)
	}
}

// A finalizer whose runner dies with the call has not failed: nobody knows
// whether the cleanup ran, so it stays pending (its lease given back) and
// the sweeper delivers it again on a live runner, instead of recording a
// failed cleanup that no one will ever run.
func TestACleanupWhoseRunnerDiedIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	var charges, audits atomic.Int64
	var dying *testRunner
	dying = startRunner(t, a, map[string]handlerFunc{
		"charge": okHandler(t, &charges),
		"audit": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			audits.Add(1)
			go dying.gs.Stop() // the runner dies with the call in flight
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	a.register(t, []byte(withFinalizer))
	resp, err := a.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "charged"})
	if err != nil {
		t.Fatal(err)
	}
	run := resp.GetReply().GetRunId()
	f := loadDoc(t, a, run).FinalizerLedger["audit"]
	if f == nil || f.Status != "pending" || f.LeaseToken != "" || audits.Load() != 1 {
		t.Fatalf("after its runner died: audit = %+v (%d calls), want pending with no lease", f, audits.Load())
	}
	if _, err := a.registry.Deregister(ctx(t), &realmv1.DeregisterRequest{RunnerId: dying.id}); err != nil {
		t.Fatal(err)
	}
	startRunner(t, a, map[string]handlerFunc{"charge": okHandler(t, &charges), "audit": okHandler(t, &audits)})
	if n, err := a.eng.SweepFinalizers(context.Background(), 10); err != nil || n != 0 {
		t.Fatalf("sweep within the grace started %d, %v; want 0", n, err)
	}
	a.clock.Advance(11 * time.Second)
	if n, err := a.eng.SweepFinalizers(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("sweep after the grace started %d, %v; want 1", n, err)
	}
	for i := 0; i < 500; i++ {
		if f = loadDoc(t, a, run).FinalizerLedger["audit"]; f.Status != "pending" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f.Status != "completed" || audits.Load() != 2 {
		t.Errorf("audit = %+v after %d calls, want completed by the second", f, audits.Load())
	}
}

// awaitCleanup waits until the one run of "charged" has its finalizer's
// first call in flight (audits counts the calls) and returns the run.
func awaitCleanup(t *testing.T, a *env, audits *atomic.Int64) string {
	t.Helper()
	for range 500 {
		list, _ := a.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "charged"})
		if len(list.GetRuns()) == 1 && audits.Load() == 1 {
			return list.GetRuns()[0].GetRunId()
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the finalizer never started")
	return ""
}
