package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// devMode is the program a `realm workflow run` prompt stands for.
var devMode = &realmv1.Caller{By: "dev@laptop", BySource: "stated", Channel: realmv1.Channel_CHANNEL_RUN}

// heldDraft starts a support run and claims its draft step as the dev
// mode does while its prompt waits (cli.md §2.6).
func heldDraft(t *testing.T, eng realmv1.EngineServiceClient) (run, token string) {
	t.Helper()
	start, err := eng.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "support", Params: params(t, map[string]any{"ticket": 3})})
	if err != nil {
		t.Fatal(err)
	}
	run = start.GetReply().GetRunId()
	claim, err := eng.ClaimStep(ctx(t), &realmv1.ClaimStepRequest{RunId: run, Step: "draft", Caller: devMode})
	if err != nil || claim.GetClaimToken() == "" {
		t.Fatalf("claim: %v %v", err, claim.GetReply().GetErrors())
	}
	return run, claim.GetClaimToken()
}

// `realm agent` on a run whose agent step another program holds waits for
// the record to change, then drives the step itself once the claim is
// given back.
func TestADriveWaitsForAStepHeldElsewhereThenDrivesIt(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), InFlightWait: 30 * time.Second})
	run, token := heldDraft(t, eng)

	var released atomic.Bool
	go func() {
		// The person leaves the prompt a little later.
		time.Sleep(1500 * time.Millisecond)
		resp, err := eng.ReleaseClaim(context.Background(), &realmv1.ReleaseClaimRequest{RunId: run, Step: "draft", ClaimToken: token, Caller: devMode})
		released.Store(err == nil && resp.GetReleased())
	}()
	driver := &realmv1.Caller{By: "ops@host", BySource: "stated", Channel: realmv1.Channel_CHANNEL_AGENT}
	evs := drive(t, agent, &realmv1.DriveRunRequest{RunId: run, Options: opts("openai", "gpt-test"), Caller: driver}, func(ev *realmv1.DriveEvent) {
		if ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
			go func() {
				_, _ = eng.SubmitHumanResponse(context.Background(), &realmv1.SubmitHumanResponseRequest{
					RunId: run, GateId: ev.GetGate().GetGateId(), Choice: "send"})
			}()
		}
	})
	if end := last(evs); end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || !released.Load() {
		t.Fatalf("end = %v (released %v)\n%s", end, released.Load(), texts(evs))
	}
	// The drive, not the dev mode, answered the step.
	state, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run, IncludeSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := state.GetState().GetExtra().AsMap()["steps"].(map[string]any)
	draft, _ := steps["draft"].(map[string]any)
	attempts, _ := draft["attempts"].([]any)
	if len(attempts) != 1 {
		t.Fatalf("draft attempts = %v", draft)
	}
	if by, _ := attempts[0].(map[string]any)["driven_by"].(map[string]any); by["by"] != "ops@host" || by["channel"] != "agent" {
		t.Errorf("draft driven by %v, want the agent", by)
	}
}

// A step held the whole time stops the drive after InFlightWait, with the
// line that says so, and the run is left as it was.
func TestADriveStopsWhenTheHeldStepNeverMoves(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), InFlightWait: 1500 * time.Millisecond})
	run, _ := heldDraft(t, eng)
	evs := drive(t, agent, &realmv1.DriveRunRequest{RunId: run, Options: opts("openai", "gpt-test")}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_STOPPED ||
		!strings.Contains(texts(evs), "• Step 'draft' has been in flight since ") ||
		!strings.Contains(texts(evs), ", taken by dev@laptop (as stated, via run); the record has not changed for 1.5s. If the program that took it is gone: realm run reclaim "+run+" --step draft --force\n") {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	if p := phaseOf(t, eng, run); p != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Errorf("run phase = %v, want running", p)
	}
}
