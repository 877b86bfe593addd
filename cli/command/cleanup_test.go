package command

import (
	"fmt"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const waitingWorkflow = "id: waiting\nname: Waiting\nversion: 1\nsteps:\n  answer:\n    description: Answer.\n    execution: agent\n"

// realm run cleanup abandons the open runs idle for at least the duration
// (by their last write) with the cleanup seal, lists them, and leaves the
// rest; --dry-run changes nothing.
func TestRunCleanupAbandonsIdleRuns(t *testing.T) {
	t.Parallel()
	eachBackendWithClock(t, func(t *testing.T, e *reclaimEnv) {
		if resp, err := e.engine.RegisterWorkflow(e.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(waitingWorkflow), Path: "workflow.yaml"}}); err != nil || !resp.GetRegistered() {
			t.Fatalf("register: %v %v", err, resp.GetReport().GetErrors())
		}
		start := func() string {
			resp, err := e.engine.StartRun(e.ctx(), &realmv1.StartRunRequest{WorkflowId: "waiting"})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply().GetRunId()
		}
		idle := start() // last written 01:00
		e.clock.Set(time.Date(2026, 10, 2, 1, 50, 0, 0, time.UTC))
		recent := start() // 01:50
		e.clock.Set(time.Date(2026, 10, 2, 2, 0, 0, 0, time.UTC))
		phase := func(run string) (string, string, string) {
			st, err := e.engine.GetRunState(e.ctx(), &realmv1.GetRunStateRequest{RunId: run})
			if err != nil {
				t.Fatal(err)
			}
			s := st.GetState()
			return s.GetRunPhase().String(), s.GetSealedByArm(), s.GetTerminalReason()
		}

		want(t, e.realm(nil, "run", "cleanup", "--older-than", "30m", "--dry-run"), 0, lines(
			"Would mark 1 run(s) as abandoned.",
			"  • "+idle,
			cleanupNote,
		), "")
		if p, _, _ := phase(idle); p != "RUN_PHASE_RUNNING" {
			t.Fatalf("--dry-run changed the run: %s", p)
		}

		want(t, e.realm(nil, "run", "cleanup", "--older-than", "30m"), 0, lines(
			"Marked 1 run(s) as abandoned.",
			"  • "+idle,
			cleanupNote,
		), "")
		if p, arm, reason := phase(idle); p != "RUN_PHASE_ABANDONED" || arm != "cleanup_sweep" || reason != "Marked abandoned by realm cleanup" {
			t.Errorf("cleaned run: %s %s %q", p, arm, reason)
		}
		if p, _, _ := phase(recent); p != "RUN_PHASE_RUNNING" {
			t.Errorf("the recent run was touched: %s", p)
		}
		want(t, e.realm(nil, "run", "cleanup", "--older-than", "1h"), 0, lines("Marked 0 run(s) as abandoned."), "")

		// The engine decides again in the write: a run written within the
		// threshold is refused and left running.
		resp, err := e.engine.AbandonRun(e.ctx(), &realmv1.AbandonRunRequest{RunId: recent, CleanupIdleSeconds: 3600})
		if err != nil || resp.GetRefusal().GetErrors()[0] != fmt.Sprintf("Run '%s' was written at 2026-10-02T01:50:00.000Z, within the idle threshold; cleanup leaves it.", recent) {
			t.Errorf("cleanup abandon of a recent run = %v, %v", resp, err)
		}
		if p, _, _ := phase(recent); p != "RUN_PHASE_RUNNING" {
			t.Errorf("the refused cleanup changed the run: %s", p)
		}
	})
}

func TestRunCleanupRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1") // every refusal comes before any call
	want(t, realm(nil, "run", "cleanup"), 1, "", "--older-than <duration> is required (e.g. 30d, 6h, 10m).\n")
	want(t, realm(nil, "run", "cleanup", "--older-than", "5x"), 1, "", "Invalid duration '5x'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m\n")
}
