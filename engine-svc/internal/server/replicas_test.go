package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// replicaOf serves a second engine on e's Redis and prefix (another
// replica of the same deployment), configured by o; Store, Registry and
// Logger are filled in.
func replicaOf(t *testing.T, e *env, o engine.Options) *env {
	t.Helper()
	st := store.NewRedis(e.rc, store.Options{Prefix: e.prefix, Buckets: 16})
	reg := registry.New(e.rc, e.prefix, o.Clock, time.Millisecond)
	o.Store, o.Registry, o.Logger, o.CheckCache = st, reg, slog.New(slog.DiscardHandler), true
	eng := engine.New(o)
	conn := serve(t, eng, reg)
	return &env{client: realmv1.NewEngineServiceClient(conn), registry: realmv1.NewRegistryServiceClient(conn), st: st, rc: e.rc, prefix: e.prefix, eng: eng, clock: e.clock}
}

const twoAgentSteps = `id: two_steps
name: Two steps
version: 1
steps:
  first:
    description: First.
    execution: agent
  second:
    description: Second.
    execution: agent
    depends_on: [first]
`

// A replica that cached a run decides a refusal on what the store holds,
// not on its cached copy: after another replica recorded `first`, `second`
// is accepted by the replica that last saw the run before `first`.
func TestAReplicaDoesNotRefuseOnAStaleCachedRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, a *env) {
		b := replicaOf(t, a, engine.Options{Clock: a.clock.Now})
		if r := a.register(t, []byte(twoAgentSteps)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, a, "two_steps", nil).GetRunId() // a caches the run
		if r := step(t, b, run, "first", nil); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("first on the other replica: %v", r)
		}
		r := step(t, a, run, "second", nil)
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("second on the replica that cached the run: %v", r)
		}
	})
}

// Options.ClaimWindow (engine-svc's testing-only --claim-window) replaces
// the spec's window: a claim's deadline is its start plus the window, and
// it is stale once that has passed.
func TestClaimWindowSetsTheClaimDeadline(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		const window = 90 * time.Second // the spec's rule gives 600 s + 1 min here
		short := replicaOf(t, e, engine.Options{Clock: e.clock.Now, ClaimWindow: window})
		release := make(chan struct{})
		defer close(release)
		startRunner(t, e, map[string]handlerFunc{"work": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}})
		short.register(t, oneStep("work", "    timeout_seconds: 600\n"))
		go func() {
			_, _ = short.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "one_work"})
		}()
		var claim *record.Claim
		var run string
		for i := 0; i < 500 && claim == nil; i++ {
			time.Sleep(10 * time.Millisecond)
			list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_work"})
			if len(list.GetRuns()) != 1 {
				continue
			}
			run = list.GetRuns()[0].GetRunId()
			snap, err := e.st.LoadRun(ctx(t), run)
			if err != nil {
				continue
			}
			var r record.Run
			if err := json.Unmarshal(snap.Doc, &r); err == nil {
				claim = r.Claims["work"]
			}
		}
		if claim == nil || claim.Deadline == nil {
			t.Fatalf("no claim with a deadline on work: %+v", claim)
		}
		if got := record.ParseTime(*claim.Deadline).Sub(record.ParseTime(claim.Since)); got != window {
			t.Errorf("deadline - since = %s, want the window %s", got, window)
		}
		e.clock.Advance(window + time.Second)
		report, _ := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run})
		if !strings.Contains(report.GetReply().GetContextHint(), "  • work: claim_stale") {
			t.Errorf("after the window: %v", report.GetReply().GetContextHint())
		}
	})
}
