package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const withFinalizer = `id: charged
name: Charge with audit
version: 1
steps:
  charge:
    description: Charge the card.
    execution: auto
    handler: charge
  audit:
    description: Write an audit line however the run ended.
    execution: finalizer
    handler: audit
    on_outcome: always
`

func okHandler(t *testing.T, calls *atomic.Int64) handlerFunc {
	return func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
		calls.Add(1)
		return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"ok": true})}, nil
	}
}

func TestFinalizerRunsAfterTheSealAndNeverChangesTheEnding(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		var audits atomic.Int64
		startRunner(t, e, map[string]handlerFunc{
			"charge": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
				return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "card declined"}}, nil
			},
			"audit": okHandler(t, &audits),
		})
		e.register(t, []byte(withFinalizer))
		r := start(t, e, "charged", nil)
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED || audits.Load() != 1 {
			t.Fatalf("reply %v, audits %d", r, audits.Load())
		}
		s := state(t, e, r.GetRunId())
		if s.GetSealedByArm() != "step_failure" || !strings.Contains(strings.Join(s.GetCompletedSteps(), ","), "audit") {
			t.Errorf("state = %v", s)
		}
	})
}

func TestPendingCleanupIsNamedThenDrainedOnceByTwoDrainers(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		var charges, audits atomic.Int64
		startRunner(t, e, map[string]handlerFunc{"charge": okHandler(t, &charges)})
		e.register(t, []byte(withFinalizer))
		r := start(t, e, "charged", nil)
		run := r.GetRunId()
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("start = %v", r)
		}
		again := step(t, e, run, "charge", nil)
		want := fmt.Sprintf("Run '%s' is already terminal (completed); no steps executed. Cleanup step left pending: 'audit' — 'realm run drain %s --force' runs it with code that has its handler.", run, run)
		if again.GetContextHint() != want {
			t.Errorf("hint = %q", again.GetContextHint())
		}
		preview, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run})
		if err != nil || !strings.Contains(preview.GetReply().GetContextHint(), "[1] audit: actionable — would lease and run on --force") {
			t.Fatalf("preview = %v %v", preview, err)
		}
		startRunner(t, e, map[string]handlerFunc{"audit": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			audits.Add(1)
			time.Sleep(50 * time.Millisecond) // hold the lease while the other drainer looks
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Force: true}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if audits.Load() != 1 {
			t.Errorf("the cleanup ran %d times, want once", audits.Load())
		}
		done, _ := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Force: true})
		if done.GetReply().GetContextHint() != fmt.Sprintf("Run '%s' has no pending finalizers. Nothing to drain.", run) {
			t.Errorf("after draining = %v", done.GetReply())
		}
	})
}

func TestResumeReopensAFailedRunAndRefusesAnAbortedOne(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: once\nname: Once\nversion: 1\nsteps:\n  ask:\n    description: Ask.\n    execution: agent\n    validation_exhaustion: { threshold: 1 }\n    output_schema:\n      type: object\n      required: [ok]\n      properties:\n        ok: { type: boolean }\n"
		e.register(t, []byte(yaml))
		run := start(t, e, "once", nil).GetRunId()
		step(t, e, run, "ask", map[string]any{"ok": "no"})
		resp, err := e.client.ResumeRun(ctx(t), &realmv1.ResumeRunRequest{RunId: run, FromStep: "ask"})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetReply()
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING ||
			!strings.HasPrefix(r.GetContextHint(), fmt.Sprintf("Resumed run '%s': step 'ask' re-enabled and run reset to 'running'.", run)) {
			t.Fatalf("resume = %v", r)
		}
		if done := step(t, e, run, "ask", map[string]any{"ok": true}); done.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Errorf("after resume = %v", done)
		}
		bad, _ := e.client.ResumeRun(ctx(t), &realmv1.ResumeRunRequest{RunId: run, FromStep: "ask"})
		if bad.GetReply().GetErrors()[0] != fmt.Sprintf("Run %s is in phase 'completed', which is not resumable.", run) {
			t.Errorf("resume of a completed run = %v", bad.GetReply())
		}

		e.register(t, readFile(t, "testdata/shipping.yaml"))
		opened := start(t, e, "shipping", map[string]any{"order": 1})
		respond(t, e, opened.GetRunId(), opened.GetGate().GetGateId(), "hold", nil)
		ab, _ := e.client.ResumeRun(ctx(t), &realmv1.ResumeRunRequest{RunId: opened.GetRunId(), FromStep: "approve"})
		if ab.GetReply().GetErrors()[0] != fmt.Sprintf("Run %s was aborted (step 'only_if_shipping') — aborted runs are never resumable.", opened.GetRunId()) {
			t.Errorf("resume of an aborted run = %v", ab.GetReply())
		}
	})
}

func TestPurgePreviewsThenRemovesAnEndedRunOnly(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/routing.yaml"))
		open := start(t, e, "routing", nil).GetRunId()
		if r, _ := e.client.PurgeRun(ctx(t), &realmv1.PurgeRunRequest{RunId: open, Force: true}); r.GetPurged() ||
			r.GetMessage() != fmt.Sprintf("Refusing to purge '%s': not terminal (phase: 'running').", open) {
			t.Errorf("purge of an open run = %v", r)
		}
		run := start(t, e, "routing", nil).GetRunId()
		step(t, e, run, "pick", map[string]any{"lane": "fast"})
		preview, _ := e.client.PurgeRun(ctx(t), &realmv1.PurgeRunRequest{RunId: run})
		if preview.GetPurged() || !strings.Contains(preview.GetMessage(), "WOULD be purged") {
			t.Errorf("preview = %v", preview)
		}
		if r, _ := e.client.PurgeRun(ctx(t), &realmv1.PurgeRunRequest{RunId: run, Force: true}); !r.GetPurged() {
			t.Errorf("purge = %v", r)
		}
		gone, _ := e.client.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
		if gone.GetRefusal().GetErrorCode() != "STATE_RUN_NOT_FOUND" {
			t.Errorf("state after purge = %v", gone)
		}
	})
}

// An export carries the whole record; the claim tokens (proof that settles
// a step) only when asked for with with_secrets.
func TestExportCarriesTheWholeRecordAndClaimTokensOnlyWithSecrets(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/support.yaml"))
		run := start(t, e, "support", nil).GetRunId()
		opened := step(t, e, run, "draft", map[string]any{"reply": "Hi."})
		for _, withSecrets := range []bool{false, true} {
			resp, err := e.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run, WithSecrets: withSecrets})
			if err != nil {
				t.Fatal(err)
			}
			var b struct {
				Version int `json:"realm_export_version"`
				Run     struct {
					Claims   map[string]map[string]any `json:"claims"`
					Evidence []map[string]any          `json:"evidence"`
				} `json:"run"`
				Complete bool `json:"complete"`
			}
			if err := json.Unmarshal(resp.GetBundle(), &b); err != nil {
				t.Fatal(err)
			}
			if b.Version != 4 || !b.Complete || b.Run.Claims["draft"] == nil || len(b.Run.Evidence) != 1 {
				t.Errorf("bundle = %s", resp.GetBundle())
			}
			token, has := b.Run.Claims["draft"]["token"]
			switch {
			case withSecrets && token != opened.GetGate().GetClaimToken():
				t.Errorf("with secrets: claim token %v, want %s", token, opened.GetGate().GetClaimToken())
			case !withSecrets && (has || strings.Contains(string(resp.GetBundle()), opened.GetGate().GetClaimToken())):
				t.Errorf("without secrets the bundle holds the claim token:\n%s", resp.GetBundle())
			}
		}
	})
}
