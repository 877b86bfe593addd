package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/realm-go/realm/agent-svc/internal/durable"
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
		gate, leave := driveToGate(t, agent, detach)
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

// A detached drive outlives the agent-svc that took it: that process stops
// (a deploy) while the run waits at its gate, the gate is answered, and
// another agent-svc sharing the Redis book takes the owed drive up and
// finishes the run; meanwhile it never took a drive whose lease was held.
func TestAnOwedDriveIsTakenUpByAnotherAgentSvc(t *testing.T) {
	t.Parallel()
	support, err := os.ReadFile("testdata/support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *realmv1.DriveRunRequest
	}{
		{"a registered workflow", &realmv1.DriveRunRequest{WorkflowId: "support", Detach: true}},
		// The owed drive attaches to the run: what only creation takes
		// (the file, --register) is not sent again.
		{"a file run without registering", &realmv1.DriveRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: support, Path: "support.yaml"}, Detach: true}},
		{"a file registered first", &realmv1.DriveRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: support, Path: "support.yaml"}, Register: true, Detach: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			owedDriveIsTakenUp(t, tc.req)
		})
	}
}

// owedDriveIsTakenUp starts req (detached) on one agent-svc, stops it at
// the run's gate, and checks another agent-svc takes the drive up and ends
// the run without redoing recorded work.
func owedDriveIsTakenUp(t *testing.T, req *realmv1.DriveRunRequest) {
	rc := redisFor(t, "redis")
	prefix := fmt.Sprintf("realm-test:%d:book", time.Now().UnixNano())
	t.Cleanup(func() {
		keys, _ := rc.Keys(context.Background(), "{"+prefix+"}:*").Result()
		if len(keys) > 0 {
			rc.Del(context.Background(), keys...)
		}
	})
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	first, firstSvc := startAgentServer(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), Book: durable.New(rc, prefix, 300*time.Millisecond)})
	book := durable.New(rc, prefix, 300*time.Millisecond)
	_, secondSvc := startAgentServer(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), Book: book})
	pickup, stopPickup := context.WithCancel(context.Background())
	picking := make(chan struct{})
	go func() { defer close(picking); secondSvc.Pickup(pickup, 20*time.Millisecond) }()
	t.Cleanup(func() { stopPickup(); <-picking })

	gate, leave := driveToGateWith(t, first, req)
	leave()
	run := gate.GetRunId()
	time.Sleep(200 * time.Millisecond) // pickups run while the first holds the lease
	if wanted, _ := book.Wanted(ctx(t), 10); len(wanted) != 1 || wanted[0] != run {
		t.Fatalf("owed drives = %v, want the run", wanted)
	}
	firstSvc.Stop() // a deploy stops the first agent-svc
	if _, err := eng.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate.GetGate().GetGateId(), Choice: "send"}); err != nil {
		t.Fatal(err)
	}
	phase := realmv1.RunPhase_RUN_PHASE_UNSPECIFIED
	for i := 0; i < 250; i++ {
		if phase = phaseOf(t, eng, run); phase == realmv1.RunPhase_RUN_PHASE_COMPLETED {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if phase != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("the run is %v after the first agent-svc stopped, want completed by the second", phase)
	}
	if n := len(st.seen()); n != 1 {
		t.Errorf("model requests = %d, want the one draft: the taken-up drive redid recorded work", n)
	}
	for i := 0; i < 100; i++ {
		if wanted, _ := book.Wanted(ctx(t), 10); len(wanted) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("the finished drive is still owed")
}

// driveToGate starts a drive of the support workflow and reads its events
// until its gate opens; leave ends the caller's stream.
func driveToGate(t *testing.T, agent realmv1.AgentServiceClient, detach bool) (gate *realmv1.DriveEvent, leave context.CancelFunc) {
	t.Helper()
	return driveToGateWith(t, agent, &realmv1.DriveRunRequest{WorkflowId: "support", Detach: detach})
}

// driveToGateWith is driveToGate for the support workflow as req names it
// (an id, or a file) and detaches it.
func driveToGateWith(t *testing.T, agent realmv1.AgentServiceClient, req *realmv1.DriveRunRequest) (gate *realmv1.DriveEvent, leave context.CancelFunc) {
	t.Helper()
	callCtx, leave := context.WithCancel(ctx(t))
	r := proto.Clone(req).(*realmv1.DriveRunRequest)
	r.Params, r.Options = params(t, map[string]any{"ticket": 3}), opts("openai", "gpt-test")
	stream, err := agent.DriveRun(callCtx, r)
	if err != nil {
		leave()
		t.Fatal(err)
	}
	for gate == nil {
		resp, err := stream.Recv()
		if err != nil {
			leave()
			t.Fatalf("detach %v: the drive ended before its gate: %v", r.GetDetach(), err)
		}
		if ev := resp.GetEvent(); ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
			gate = ev
		}
	}
	return gate, leave
}
