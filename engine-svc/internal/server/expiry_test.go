package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// openExpiring starts a run parked at the expiring gate and moves the clock
// past its time.
func openExpiring(t *testing.T, e *env, wf string, overdue time.Duration) (run, gate string) {
	t.Helper()
	if r := e.register(t, readFile(t, "testdata/"+wf+".yaml")); !r.GetRegistered() {
		t.Fatal(r.GetReport().GetText())
	}
	opened := start(t, e, wf, nil)
	if opened.GetGate().GetExpiresAt() == nil {
		t.Fatalf("gate has no expires_at: %v", opened.GetGate())
	}
	e.clock.Advance(60*time.Second + overdue)
	return opened.GetRunId(), opened.GetGate().GetGateId()
}

func TestLateAnswerCarriesOutTheExpiryFirst(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, gate := openExpiring(t, e, "expiring", 3*time.Minute)
		if s := state(t, e, run); s.GetNextActionsStatus() != "advance_owed" || s.GetNextActions()[0].GetInstruction().GetTool() != "advance_run" {
			t.Errorf("state of an expired gate = %v", s)
		}
		r := respond(t, e, run, gate, "hold", nil)
		wantLine := fmt.Sprintf("gate '%s' on 'approve' had expired 3m before this call — this submit_human_response call first carried out its declared settle_default: the default choice 'hold' was recorded (enacted_via: submit_human_response).", gate)
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.AnswerRecorded == nil || r.GetAnswerRecorded() ||
			r.GetContextHint() != "the outcome matches your choice, but it was settled by timeout; your response was not recorded. Guard step 'only_if_shipping' aborted the run." ||
			r.GetWarnings()[0] != wantLine || r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
			t.Fatalf("late answer = %v", r)
		}
		d := r.GetErrorDetails().AsMap()
		if d["winning_choice"] != "hold" || d["resolved_by"] != "timeout" || d["overdue_ms"].(float64) < 180000 || d["gateId"] != gate {
			t.Errorf("error_details = %v", d)
		}
		if r.GetEndedBy().GetArm() != "guard_abort" || len(r.GetGuards()) != 1 {
			t.Errorf("guards = %v %v", r.GetGuards(), r.GetEndedBy())
		}
		// The expiry recorded 'hold'; another choice now is refused, without guards.
		other := respond(t, e, run, gate, "ship", nil)
		if other.GetErrorCode() != "STATE_BLOCKED" || other.GetAnswerRecorded() || other.AnswerRecorded == nil ||
			other.GetErrors()[0] != fmt.Sprintf("Gate '%s' was settled by timeout with choice 'hold' — your choice 'ship' was not recorded.", gate) ||
			len(other.GetGuards()) != 0 || len(other.GetWarnings()) != 0 {
			t.Errorf("other choice after the expiry = %v", other)
		}
	})
}

func TestAdvanceRunCarriesOutAnExpiredAbort(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, gate := openExpiring(t, e, "expiring_abort", 12*time.Second)
		r := advance(t, e, run)
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED ||
			r.GetContextHint() != fmt.Sprintf("Run '%s': its expired question was carried out as declared (see warnings); no step ran. The run ended (aborted).", run) ||
			!strings.HasPrefix(r.GetWarnings()[0], fmt.Sprintf("gate '%s' on 'approve' had expired 12s before this call — this advance_run call first carried out its declared abort", gate)) {
			t.Fatalf("advance = %v", r)
		}
		s := state(t, e, run)
		if s.GetSealedByArm() != "gate_expiry_abort" || s.GetTerminalReason() != "Gate 'approve' expired and the run aborted per the workflow's declared on_expiry." {
			t.Errorf("state = %v", s)
		}
		late := respond(t, e, run, gate, "pay", nil)
		if late.GetErrorCode() != "STATE_RUN_TERMINAL" || late.AnswerRecorded != nil {
			t.Errorf("answer after an earlier abort = %v", late)
		}
	})
}

// Two engine replicas sweep the same store at once: each expiry is carried
// out exactly once.
func TestTwoSweepersCarryOutEachExpiryOnce(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := setup(t, b)
			const runs = 10
			var ids []string
			e.register(t, readFile(t, "testdata/expiring.yaml"))
			for range runs {
				ids = append(ids, start(t, e, "expiring", nil).GetRunId())
			}
			e.clock.Advance(2 * time.Minute)
			// A second replica over the same store.
			other := engine.New(engine.Options{Store: store.NewRedis(e.secondClient(t), store.Options{Prefix: e.prefix, Buckets: 16}), Clock: e.clock.Now})
			var wg sync.WaitGroup
			counts := make([]int, 2)
			for i, eng := range []*engine.Engine{e.eng, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n, err := eng.SweepExpired(context.Background(), 100)
					if err != nil {
						t.Error(err)
					}
					counts[i] = n
				}()
			}
			wg.Wait()
			if counts[0]+counts[1] != runs {
				t.Fatalf("sweepers carried out %v expiries, want %d in all", counts, runs)
			}
			for _, id := range ids {
				s := state(t, e, id)
				if s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED || s.GetEvidenceCount() != 2 {
					t.Errorf("run %s after the sweep: phase %v, %d entries", id, s.GetRunPhase(), s.GetEvidenceCount())
				}
			}
			if n, _ := e.eng.SweepExpired(context.Background(), 100); n != 0 {
				t.Errorf("a second sweep carried out %d", n)
			}
		})
	}
}

// Whoever carries out an expiry — a late answer, advance_run, or the
// sweeper — the run ends the same way.
func TestExpiryEndsTheSameWayWhoeverGetsThereFirst(t *testing.T) {
	t.Parallel()
	enactors := map[string]func(t *testing.T, e *env, run, gate string){
		"answer":  func(t *testing.T, e *env, run, gate string) { respond(t, e, run, gate, "hold", nil) },
		"advance": func(t *testing.T, e *env, run, gate string) { advance(t, e, run) },
		"sweeper": func(t *testing.T, e *env, run, gate string) {
			if n, err := e.eng.SweepExpired(context.Background(), 10); err != nil || n != 1 {
				t.Fatalf("sweep: %d %v", n, err)
			}
		},
	}
	for name, enact := range enactors {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, e *env) {
				run, gate := openExpiring(t, e, "expiring", time.Second)
				enact(t, e, run, gate)
				s := state(t, e, run)
				ac := s.GetAbortContext().AsMap()
				if s.GetSealedByArm() != "guard_abort" || s.GetSealedByStep() != "only_if_shipping" ||
					ac["abort_message"] != "The order was held." || strings.Join(s.GetCompletedSteps(), ",") != "approve" ||
					strings.Join(s.GetSkippedSteps(), ",") != "only_if_shipping" {
					t.Errorf("state after %s = %v", name, s)
				}
			})
		})
	}
}

// Two answers with different choices sent at once: exactly one is
// recorded; the other is refused with the sentence naming the winner.
func TestTwoConflictingAnswersRecordExactlyOne(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/shipping.yaml"))
		opened := start(t, e, "shipping", map[string]any{"order": 1})
		run, gate := opened.GetRunId(), opened.GetGate().GetGateId()
		replies := make([]*realmv1.Reply, 2)
		var wg sync.WaitGroup
		for i, choice := range []string{"ship", "hold"} {
			wg.Add(1)
			go func() { defer wg.Done(); replies[i] = respond(t, e, run, gate, choice, nil) }()
		}
		wg.Wait()
		var won, lost *realmv1.Reply
		for _, r := range replies {
			if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK {
				won = r
			} else {
				lost = r
			}
		}
		if won == nil || lost == nil {
			t.Fatalf("replies = %v", replies)
		}
		winner := "ship"
		if won.GetRunPhase() == realmv1.RunPhase_RUN_PHASE_ABORTED {
			winner = "hold"
		}
		loser := map[string]string{"ship": "hold", "hold": "ship"}[winner]
		if want := fmt.Sprintf("Gate '%s' was already resolved with choice '%s' — your choice '%s' was not recorded.", gate, winner, loser); lost.GetErrors()[0] != want {
			t.Errorf("loser = %q, want %q", lost.GetErrors()[0], want)
		}
		if s := state(t, e, run); s.GetEvidenceCount() != 2 {
			t.Errorf("%d entries recorded, want the gate answer and the guard", s.GetEvidenceCount())
		}
	})
}

// An answer racing the sweeper on an expired gate: exactly one carries the
// expiry out, and the answer's reply says which (it is never recorded).
func TestAnswerRacingTheSweeperHasOneOutcome(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, gate := openExpiring(t, e, "expiring", time.Second)
		var reply *realmv1.Reply
		var swept int
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); reply = respond(t, e, run, gate, "ship", nil) }()
		go func() { defer wg.Done(); swept, _ = e.eng.SweepExpired(context.Background(), 10) }()
		wg.Wait()
		if reply.AnswerRecorded == nil || reply.GetAnswerRecorded() || reply.GetErrorCode() != "STATE_BLOCKED" {
			t.Fatalf("answer = %v", reply)
		}
		enactedByAnswer := len(reply.GetWarnings()) == 1 && len(reply.GetGuards()) == 1
		if enactedByAnswer == (swept == 1) {
			t.Errorf("both or neither carried the expiry out: answer %v, sweeper %d", enactedByAnswer, swept)
		}
		if s := state(t, e, run); s.GetEvidenceCount() != 2 || s.GetSealedByArm() != "guard_abort" {
			t.Errorf("state = %v", s)
		}
	})
}

// An answer naming another gate while the open question's time is up is
// refused without carrying the expiry out; it points at advance_run.
func TestAnAnswerToAnotherGateDoesNotCarryOutTheExpiry(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, gate := openExpiring(t, e, "expiring", 15*time.Second)
		r := respond(t, e, run, "not-this-gate", "ship", nil)
		wantHint := fmt.Sprintf("Gate 'not-this-gate' is not the open gate and matches no committed resolution. The question on step 'approve' (gate '%s') can no longer be answered: its time is up — call advance_run to carry out its declared settle_default.", gate)
		if r.GetErrorCode() != "STATE_BLOCKED" || r.GetContextHint() != wantHint || len(r.GetNextActions()) != 1 ||
			r.GetNextActions()[0].GetInstruction().GetTool() != "advance_run" {
			t.Fatalf("refusal = %v", r)
		}
		s := state(t, e, run)
		if s.GetPendingGate().GetGateId() != gate || s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING || len(s.GetCompletedSteps()) != 0 {
			t.Errorf("the refusal carried the expiry out: %v", s)
		}
	})
}
