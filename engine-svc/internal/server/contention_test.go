package server_test

import (
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Eighty callers writing one run at once through four replicas all land: an act that loses the
// race reloads and tries again after a jittered, growing pause, so the
// losers spread out instead of colliding again in step and running out of
// attempts (STATE_SNAPSHOT_MISMATCH).
func TestManyWritersOnOneRunAllLand(t *testing.T) {
	t.Parallel()
	e := setup(t, "redis")
	e.register(t, readFile(t, "testdata/triage.yaml"))
	run := start(t, e, "triage", map[string]any{"ticket": 3}).GetRunId()
	// Four replicas of the engine, as a deployment has: their writes
	// race in the store, not behind one process's lock.
	replicas := []*env{e}
	for range 3 {
		replicas = append(replicas, replicaOf(t, e, engine.Options{Clock: e.clock.Now}))
	}
	const writers = 80
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			data, _ := structpb.NewStruct(map[string]any{"writer": i})
			resp, err := replicas[i%len(replicas)].client.AppendTrace(ctx(t), &realmv1.AppendTraceRequest{RunId: run, StepId: "classify",
				WriterNonce: fmt.Sprintf("w%d", i), Entries: []*realmv1.TraceEntry{{Event: "note", Data: data}}})
			switch {
			case err != nil:
				errs[i] = err
			case resp.GetRefusal() != nil:
				errs[i] = fmt.Errorf("refused: %s %v", resp.GetRefusal().GetErrorCode(), resp.GetRefusal().GetErrors())
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	data, _ := structpb.NewStruct(map[string]any{"writer": "last"})
	resp, err := e.client.AppendTrace(ctx(t), &realmv1.AppendTraceRequest{RunId: run, StepId: "classify", WriterNonce: "last",
		Entries: []*realmv1.TraceEntry{{Event: "note", Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := resp.GetCounts().GetFileCount(); n != writers+1 {
		t.Errorf("the run holds %d trace entries, want %d", n, writers+1)
	}
}
