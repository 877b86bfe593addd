package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A detached drive is agent-svc's own: its caller goes away while the run
// waits at a gate (as listen-svc does when it restarts), the gate is
// answered from elsewhere, and agent-svc drives the run to its end with
// nobody listening.
func TestADetachedDriveGoesOnWhenItsCallerLeaves(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), GatePoll: 20 * time.Millisecond})
	for _, detach := range []bool{false, true} {
		callCtx, leave := context.WithCancel(ctx(t))
		stream, err := agent.DriveRun(callCtx, &realmv1.DriveRunRequest{WorkflowId: "support", Params: params(t, map[string]any{"ticket": 3}),
			Options: opts("openai", "gpt-test"), Detach: detach})
		if err != nil {
			t.Fatal(err)
		}
		var gate *realmv1.DriveEvent
		for gate == nil {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("detach %v: the drive ended before its gate: %v", detach, err)
			}
			if ev := resp.GetEvent(); ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
				gate = ev
			}
		}
		leave() // the caller goes away while the run waits
		if _, err := eng.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: gate.GetRunId(), GateId: gate.GetGate().GetGateId(), Choice: "send"}); err != nil {
			t.Fatal(err)
		}
		phase := realmv1.RunPhase_RUN_PHASE_UNSPECIFIED
		for i := 0; i < 100; i++ {
			if phase = phaseOf(t, eng, gate.GetRunId()); phase == realmv1.RunPhase_RUN_PHASE_COMPLETED {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch {
		case detach && phase != realmv1.RunPhase_RUN_PHASE_COMPLETED:
			t.Errorf("detached: the run is %v after its caller left, want completed by agent-svc", phase)
		case !detach && phase == realmv1.RunPhase_RUN_PHASE_COMPLETED:
			t.Errorf("attached: the run completed although its caller left; the control case proves nothing")
		}
	}
}
