package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A runner stops answering mid-step: the claim goes stale by its deadline,
// an operator reclaims it, another runner runs the step, and the late
// result of the first attempt is never recorded.
func TestStaleClaimIsReclaimedAndTheLateResultDropped(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		release := make(chan struct{})
		var late atomic.Bool
		first := startRunner(t, e, map[string]handlerFunc{"work": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			<-release // a wedged holder
			late.Store(true)
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"by": "first"})}, nil
		}})
		e.register(t, oneStep("work", "    idempotent: true\n    timeout_seconds: 600\n"))
		firstDone := make(chan *realmv1.Reply, 1)
		go func() {
			resp, _ := e.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "one_work"})
			firstDone <- resp.GetReply()
		}()
		var run string
		for i := 0; i < 300 && run == ""; i++ {
			if list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_work"}); len(list.GetRuns()) == 1 {
				run = list.GetRuns()[0].GetRunId()
			}
			time.Sleep(10 * time.Millisecond)
		}
		e.clock.Advance(20 * time.Minute) // past the claim window (600 s + 1 min, at least 15 min)
		report, _ := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run})
		if !strings.Contains(report.GetReply().GetContextHint(), "  • work: claim_stale") {
			t.Fatalf("report = %v", report.GetReply())
		}
		refused, _ := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run, Step: "work"})
		if refused.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR || !refused.GetStepIdempotent() {
			t.Errorf("without --force = %v (step_idempotent %v)", refused.GetReply(), refused.GetStepIdempotent())
		}
		done, _ := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run, Step: "work", Force: true, OnlyIdempotent: true})
		if !strings.HasSuffix(done.GetReply().GetContextHint(), "Reclaimed 'work' (was claim_stale). It is eligible again — the next driver will re-drive it.") {
			t.Fatalf("reclaim = %v", done.GetReply())
		}
		// The first runner is gone; a healthy one takes the step.
		_, _ = e.registry.Deregister(ctx(t), &realmv1.DeregisterRequest{RunnerId: first.id})
		startRunner(t, e, map[string]handlerFunc{"work": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"by": "second"})}, nil
		}})
		if adv := advance(t, e, run); adv.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("advance = %v", adv)
		}
		close(release)
		r := <-firstDone
		if !late.Load() || !strings.Contains(r.GetContextHint(), "'work' ran here, but another process settled it first, so its outcome was not recorded.") {
			t.Errorf("first caller's reply = %v", r)
		}
		snap, _ := e.st.LoadRun(ctx(t), run)
		if string(snap.Outputs["work"]) != `{"by":"second"}` {
			t.Errorf("recorded output = %s", snap.Outputs["work"])
		}
	})
}

// Batch auto-reclaim (only_idempotent) leaves a step that is not declared
// idempotent: true; naming it by hand with --force still frees it.
func TestAutoReclaimLeavesAStepNotDeclaredIdempotent(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		startRunner(t, e, map[string]handlerFunc{"work": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}})
		e.register(t, oneStep("work", "    timeout_seconds: 600\n"))
		go func() {
			_, _ = e.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "one_work"})
		}()
		var run string
		for i := 0; i < 300 && run == ""; i++ {
			if list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_work"}); len(list.GetRuns()) == 1 {
				if s := state(t, e, list.GetRuns()[0].GetRunId()); len(s.GetInProgressSteps()) == 1 {
					run = list.GetRuns()[0].GetRunId()
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		if run == "" {
			t.Fatal("the step was never claimed")
		}
		e.clock.Advance(20 * time.Minute)
		auto, err := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run, Step: "work", Force: true, OnlyIdempotent: true})
		if err != nil || auto.GetStepIdempotent() || auto.GetReply().GetErrorCode() != "STATE_TRANSITION_DENIED" ||
			auto.GetReply().GetErrors()[0] != fmt.Sprintf("'work' is not declared idempotent: true — batch auto-reclaim leaves it. To re-drive it anyway: realm run reclaim %s --step work --force", run) {
			t.Fatalf("auto-reclaim of a non-idempotent step = %v, %v", auto, err)
		}
		if s := state(t, e, run); len(s.GetInProgressSteps()) != 1 {
			t.Fatalf("the refused auto-reclaim changed the run: %v", s.GetInProgressSteps())
		}
		byHand, _ := e.client.ReclaimRun(ctx(t), &realmv1.ReclaimRunRequest{RunId: run, Step: "work", Force: true})
		if !strings.HasSuffix(byHand.GetReply().GetContextHint(), "Reclaimed 'work' (was claim_stale). It is eligible again — the next driver will re-drive it.") {
			t.Fatalf("reclaim by hand = %v", byHand.GetReply())
		}
	})
}
