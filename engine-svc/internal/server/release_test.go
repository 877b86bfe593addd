package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A call that ends while its handler runs (the caller left, or the server
// stopped after its grace) releases the step's claim in one last write:
// the step is pending again with nothing recorded, so the next caller runs
// it at once instead of waiting out the claim deadline.
func TestEndedCallReleasesItsClaimAndTheNextCallRunsTheStep(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		entered := make(chan struct{}, 4)
		var answer atomic.Bool // false: hang until the call is cut off
		startRunner(t, e, map[string]handlerFunc{"work": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			if !answer.Load() {
				entered <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"done": true})}, nil
		}})
		e.register(t, oneStep("work", "    timeout_seconds: 600\n"))

		cctx, cancel := context.WithCancel(context.Background())
		ended := make(chan error, 1)
		go func() {
			_, err := e.client.StartRun(cctx, &realmv1.StartRunRequest{WorkflowId: "one_work"})
			ended <- err
		}()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler was never called")
		}
		list, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_work"})
		if err != nil || len(list.GetRuns()) != 1 {
			t.Fatalf("runs: %v %v", list, err)
		}
		run := list.GetRuns()[0].GetRunId()
		if s := state(t, e, run); len(s.GetInProgressSteps()) != 1 {
			t.Fatalf("while the handler runs the step is in progress: %v", s.GetInProgressSteps())
		}
		cancel()
		<-ended

		// The release is the server's last write for the call: wait for it.
		var s *realmv1.RunState
		for i := 0; i < 500; i++ {
			if s = state(t, e, run); len(s.GetInProgressSteps()) == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if len(s.GetInProgressSteps()) != 0 || s.GetEvidenceCount() != 0 || len(s.GetCompletedSteps()) != 0 ||
			s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
			t.Fatalf("after the call ended: in progress %v, evidence %d, completed %v, phase %v",
				s.GetInProgressSteps(), s.GetEvidenceCount(), s.GetCompletedSteps(), s.GetRunPhase())
		}

		// No claim deadline to wait out: advance_run runs the step now.
		answer.Store(true)
		r := advance(t, e, run)
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("advance after the release = %v", r)
		}
		if s := state(t, e, run); s.GetEvidenceCount() != 1 {
			t.Errorf("evidence after the run = %d, want the one run of 'work'", s.GetEvidenceCount())
		}
	})
}
