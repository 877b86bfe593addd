package command

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// testClock is the engine's time in these tests; runner() fixes the CLI's
// own clock at 02:00 on the same day.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// hangingRunner is a handler runner whose 'hang' handler never answers
// until the test ends: the step it was given keeps its claim.
type hangingRunner struct {
	realmv1.UnimplementedRunnerServiceServer
	release chan struct{}
}

func (r *hangingRunner) ExecuteHandler(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return &realmv1.ExecuteHandlerResponse{}, nil
}

type reclaimEnv struct {
	*live
	clock    *testClock
	registry realmv1.RegistryServiceClient
	endpoint string
}

// hangWorkflowIdempotent is a one-step workflow whose auto step hangs, with
// the step's idempotent flag.
func hangWorkflowIdempotent(id string, idempotent bool) []byte {
	return []byte(fmt.Sprintf("id: %s\nname: Hang\nversion: 1\nsteps:\n  work:\n    description: Do the work.\n    execution: auto\n    handler: hang\n    idempotent: %v\n    timeout_seconds: 600\n", id, idempotent))
}

// claimed starts a run of workflowID at the engine's current time and
// returns once its step holds a claim (the handler never answers).
func (e *reclaimEnv) claimed(workflowID string) string {
	e.t.Helper()
	// A fresh lease at the current engine time (leases are at most 5 min).
	if _, err := e.registry.Register(e.ctx(), &realmv1.RegisterRequest{Endpoint: e.endpoint, RunnerName: "hang-runner", Lease: durationpb.New(5 * time.Minute),
		Handlers: []*realmv1.HandlerSpec{{Name: "hang"}}}); err != nil {
		e.t.Fatal(err)
	}
	before := map[string]bool{}
	if list, err := e.engine.ListRuns(e.ctx(), &realmv1.ListRunsRequest{WorkflowId: workflowID}); err == nil {
		for _, r := range list.GetRuns() {
			before[r.GetRunId()] = true
		}
	}
	go func() {
		_, _ = e.engine.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: workflowID, Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}})
	}()
	for i := 0; i < 500; i++ {
		list, err := e.engine.ListRuns(e.ctx(), &realmv1.ListRunsRequest{WorkflowId: workflowID})
		if err == nil {
			for _, r := range list.GetRuns() {
				if !before[r.GetRunId()] && slices.Contains(e.state(r.GetRunId()).GetInProgressSteps(), "work") {
					return r.GetRunId()
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("no run of %s claimed its step", workflowID)
	return ""
}

func (e *reclaimEnv) inProgress(run string) bool {
	e.t.Helper()
	return slices.Contains(e.state(run).GetInProgressSteps(), "work")
}

func eachBackendWithClock(t *testing.T, f func(t *testing.T, e *reclaimEnv)) {
	t.Helper()
	for _, backend := range enginetest.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clock := &testClock{now: time.Date(2026, 10, 2, 1, 0, 0, 0, time.UTC)}
			addr := enginetest.StartWith(t, backend, enginetest.Options{Clock: clock.Now})
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			hr := &hangingRunner{release: make(chan struct{})}
			gs := grpc.NewServer()
			realmv1.RegisterRunnerServiceServer(gs, hr)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = gs.Serve(lis) }()
			t.Cleanup(gs.Stop)
			t.Cleanup(func() { close(hr.release) }) // runs first: the hung steps answer
			f(t, &reclaimEnv{
				live:     &live{t: t, realm: runner(addr), engine: realmv1.NewEngineServiceClient(conn)},
				clock:    clock,
				registry: realmv1.NewRegistryServiceClient(conn),
				endpoint: lis.Addr().String(),
			})
		})
	}
}

func TestRunReclaimAll(t *testing.T) {
	t.Parallel()
	const (
		wouldHead = "claim(s) WOULD be auto-reclaimed (idempotent ∧ past-deadline ∧ non-gated):"
		rerun     = "Re-run with --force to reclaim them. WARNING: each re-executes its handler at-least-once with NO per-step human judgment — enable only for genuinely idempotent handlers."
		none      = "No auto-reclaimable claims found (idempotent ∧ concrete-past-deadline ∧ non-gated)."
		reclaimed = "Reclaimed 'work' (was claim_stale). It is eligible again — the next driver will re-drive it."
		// Claimed at 01:00: the claim window is 600 s + 1 min, at least 15 min.
		staleDeadline = "2026-10-02T01:15:00.000Z"
	)
	eachBackendWithClock(t, func(t *testing.T, e *reclaimEnv) {
		for _, id := range []string{"hang_a", "hang_b", "hang_risky"} {
			if resp, err := e.engine.RegisterWorkflow(e.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: hangWorkflowIdempotent(id, id != "hang_risky"), Path: "workflow.yaml"}}); err != nil || !resp.GetRegistered() {
				t.Fatalf("register %s: %v %v", id, err, resp.GetReport().GetErrors())
			}
		}
		// Three claims taken at 01:00 (stale by 02:00), one at 01:50
		// (healthy). hang_risky's step is not declared idempotent: --all
		// never selects it.
		staleA := e.claimed("hang_a")
		staleB := e.claimed("hang_b")
		risky := e.claimed("hang_risky")
		e.clock.Set(time.Date(2026, 10, 2, 1, 50, 0, 0, time.UTC))
		healthy := e.claimed("hang_a")
		e.clock.Set(time.Date(2026, 10, 2, 2, 0, 0, 0, time.UTC))
		both := []string{staleA, staleB}
		sort.Strings(both) // equally late: in run-id order

		// The single-run report still shows each claim's state.
		want(t, e.realm(nil, "run", "reclaim", healthy), 0, lines(
			fmt.Sprintf("Run '%s' (running) — in-progress claims:", healthy),
			"  • work: healthy  (deadline: 2026-10-02T02:05:00.000Z)",
			fmt.Sprintf("      reclaim: realm run reclaim %s --step work --force", healthy),
			"",
			"Reclaim re-drives a step (at-least-once — side effects may repeat). Use --step <name> --force to act on a specific claim, or --all for batch auto-reclaim.",
		), "")

		// Report mode: the stale claims, not the healthy one; nothing changes.
		want(t, e.realm(nil, "run", "reclaim", "--all"), 0, lines(
			"2 "+wouldHead,
			fmt.Sprintf("  • %s / work  (deadline %s, 45m past)", both[0], staleDeadline),
			fmt.Sprintf("  • %s / work  (deadline %s, 45m past)", both[1], staleDeadline),
			"",
			rerun,
		), "")
		for _, run := range []string{staleA, staleB, healthy} {
			if !e.inProgress(run) {
				t.Errorf("report mode changed run %s", run)
			}
		}
		// --workflow keeps one workflow's runs.
		want(t, e.realm(nil, "run", "reclaim", "--all", "--workflow", "hang_a"), 0, lines(
			"1 "+wouldHead,
			fmt.Sprintf("  • %s / work  (deadline %s, 45m past)", staleA, staleDeadline),
			"",
			rerun,
		), "")
		// --older-than is the minimum lateness.
		want(t, e.realm(nil, "run", "reclaim", "--all", "--older-than", "30m"), 0, lines(
			"2 "+wouldHead,
			fmt.Sprintf("  • %s / work  (deadline %s, 45m past)", both[0], staleDeadline),
			fmt.Sprintf("  • %s / work  (deadline %s, 45m past)", both[1], staleDeadline),
			"",
			rerun,
		), "")
		want(t, e.realm(nil, "run", "reclaim", "--all", "--older-than", "1h"), 0, lines(none), "")
		want(t, e.realm(nil, "run", "reclaim", "--all", "--workflow", "nope"), 0, lines(none), "")

		// --force acts on what the report selected, through the single-run reclaim.
		want(t, e.realm(nil, "run", "reclaim", "--all", "--workflow", "hang_b", "--force"), 0, lines(
			"⚠ Auto-reclaiming 1 claim(s); each re-executes its handler — side effects may repeat.",
			fmt.Sprintf("  ✓ %s: %s", staleB, reclaimed),
			"Reclaimed 1/1 selected claim(s).",
		), "")
		if e.inProgress(staleB) || !e.inProgress(staleA) || !e.inProgress(healthy) {
			t.Errorf("after --workflow hang_b --force: in progress %v %v %v, want false true true", e.inProgress(staleB), e.inProgress(staleA), e.inProgress(healthy))
		}
		want(t, e.realm(nil, "run", "reclaim", "--all", "--force"), 0, lines(
			"⚠ Auto-reclaiming 1 claim(s); each re-executes its handler — side effects may repeat.",
			fmt.Sprintf("  ✓ %s: %s", staleA, reclaimed),
			"Reclaimed 1/1 selected claim(s).",
		), "")
		if e.inProgress(staleA) || !e.inProgress(healthy) {
			t.Errorf("after --all --force: stale in progress %v, healthy in progress %v", e.inProgress(staleA), e.inProgress(healthy))
		}
		want(t, e.realm(nil, "run", "reclaim", "--all", "--force"), 0, lines(none), "")
		if !e.inProgress(risky) {
			t.Errorf("--all reclaimed a step not declared idempotent")
		}
	})
}

func TestRunReclaimRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1") // every refusal comes before any call
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--all", "--older-than", "0"}, "Invalid duration '0'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"--all", "--older-than", "5x"}, "Invalid duration '5x'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"r-1", "--all"}, "Cannot combine a <run-id> with --all. Use one or the other."},
		{[]string{"--all", "--step", "work"}, "--step is a per-run flag; it cannot be combined with --all."},
		{[]string{"r-1", "--workflow", "hang_a"}, "--workflow and --older-than are only valid with --all."},
		{[]string{"r-1", "--older-than", "1h"}, "--workflow and --older-than are only valid with --all."},
		{nil, "Provide a <run-id> to inspect/reclaim, or use --all for batch mode."},
		{[]string{"r-1", "--force"}, "--force requires --step <name> (or use --all for batch). Run without arguments to see a dry-run."},
	} {
		want(t, realm(nil, append([]string{"run", "reclaim"}, c.args...)...), 1, "", c.stderr+"\n")
	}
}
