package golden

import (
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// scenario reproduces the situation of one golden and returns the reply
// (or the part of it the golden shows) to compare.
type scenario struct {
	golden    string
	workflows []string
	door      door
	opts      Options
	run       func(t *testing.T, st *stack) any
	// known names where the engine's reply is known to differ from the
	// seed, quoting the seed; printed with the diff. It never hides one.
	known string
}

// claimElided: "The examples above leave out gate_claim and the warnings
// that go with it" (seed 000, submit_human_response). The scenarios pass
// the claim_token the gate handed out, so no such warning is due; the
// field must still be there ("Every ok reply to submit_human_response has
// gate_claim").
var claimElided = []string{"gate_claim"}

// triageToGate starts a triage run for ticket 101 and drives it to the
// draft's gate, returning the reply that opened it.
func triageToGate(t *testing.T, st *stack) map[string]any {
	t.Helper()
	run := runID(st.start("triage", map[string]any{"ticket": 101}))
	if r := st.execute(run, "classify", map[string]any{"category": "billing", "confidence": 0.9}); r["status"] != "ok" {
		t.Fatalf("classify: %s", pretty(r))
	}
	return st.execute(run, "draft", map[string]any{"reply": "We have refunded the charge."})
}

// lateAnswerChained: the engine's late-answer replies carry
// chained_auto_steps for the guard the expiry decided.
const lateAnswerChained = `engine mismatch: the seed says of submit_human_response "A guard step that the answer makes ready is decided in the same write. The reply names it in guards. It has no chained_auto_steps." and "From submit_human_response they are in guards only."; chained_auto_steps is "From start_run, execute_step and advance_run".`

var scenarios = []scenario{
	{
		golden: "start_run", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			return st.start("triage", map[string]any{"ticket": 101})
		},
	},
	{
		golden: "next_actions_entry", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			r := st.start("triage", map[string]any{"ticket": 101})
			actions, _ := r["next_actions"].([]any)
			if len(actions) == 0 {
				t.Fatalf("start_run offered nothing: %s", pretty(r))
			}
			return actions[0]
		},
	},
	{
		golden: "start_run_batch", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			return st.call("start_run_batch", map[string]any{"workflow_id": "triage", "items": []any{
				map[string]any{"params": map[string]any{"ticket": 201}, "idempotency_key": "ticket-201"},
				map[string]any{"params": map[string]any{"ticket": 202}},
			}})
		},
	},
	{
		golden: "refused_answer", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("triage", map[string]any{"ticket": 101}))
			return st.execute(run, "classify", map[string]any{"category": "spam", "confidence": 0.9})
		},
	},
	{
		golden: "execute_step_guard_abort", workflows: []string{"refund"},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("refund", nil))
			return st.execute(run, "assess", map[string]any{"risk": "high"})
		},
	},
	{
		golden: "gate_opened", workflows: []string{"triage"},
		// The seed's example shows neither run_id nor run_version, which its
		// table says are always present; and no gate.claim_token, which the
		// gate holds "when the store gave one" — ours always does.
		opts: Options{Elided: []string{"run_id", "run_version", "gate.claim_token"}},
		run:  func(t *testing.T, st *stack) any { return triageToGate(t, st) },
	},
	{
		golden: "submit_ok", workflows: []string{"triage"}, opts: Options{Elided: claimElided},
		run: func(t *testing.T, st *stack) any {
			opened := triageToGate(t, st)
			gate, token := gateOf(t, opened)
			return st.respond(runID(opened), gate, "send", token)
		},
	},
	{
		golden: "submit_guard_abort", workflows: []string{"shipping"}, opts: Options{Elided: claimElided},
		run: func(t *testing.T, st *stack) any {
			opened := st.start("shipping", nil)
			gate, token := gateOf(t, opened)
			return st.respond(runID(opened), gate, "hold", token)
		},
	},
	{
		golden: "late_answer_ok", workflows: []string{"expiring"}, opts: Options{Elided: claimElided},
		known: lateAnswerChained,
		run: func(t *testing.T, st *stack) any {
			opened := st.start("expiring", nil)
			gate, token := gateOf(t, opened)
			st.clock.Advance(60*time.Second + 184311*time.Millisecond) // the seed's overdue_ms
			return st.respond(runID(opened), gate, "hold", token)
		},
	},
	{
		golden: "late_answer_refused", workflows: []string{"expiring"},
		known: lateAnswerChained,
		run: func(t *testing.T, st *stack) any {
			opened := st.start("expiring", nil)
			gate, token := gateOf(t, opened)
			st.clock.Advance(60*time.Second + 12093*time.Millisecond)
			return st.respond(runID(opened), gate, "ship", token)
		},
	},
	{
		// The seed's fragment came from a stdio server run by ops on
		// server-1: the door and the derived name are the seed's.
		golden: "gate_claim", workflows: []string{"triage"}, opts: Options{Fragment: true},
		door: door{stdio: true, caller: &realmv1.Caller{By: "ops@server-1", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_STDIO}},
		run: func(t *testing.T, st *stack) any {
			opened := triageToGate(t, st)
			gate, token := gateOf(t, opened)
			return st.respond(runID(opened), gate, "send", token)
		},
	},
	{
		golden: "list_workflows", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any { return st.call("list_workflows", map[string]any{}) },
	},
	{
		golden: "abandon_run", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("triage", map[string]any{"ticket": 101}))
			return st.call("abandon_run", map[string]any{"run_id": run, "reason": "Ticket withdrawn."})
		},
	},
	{
		golden: "create_workflow",
		// The seed's example shows no run_version, which its table says
		// is always present.
		opts: Options{Elided: []string{"run_version"}},
		run: func(t *testing.T, st *stack) any {
			return st.call("create_workflow", map[string]any{
				"steps":    []any{map[string]any{"id": "collect", "description": "Collect the changes merged since the last release."}},
				"metadata": map[string]any{"name": "release-notes"},
			})
		},
	},
	{
		golden: "append_trace", workflows: []string{"triage"},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("triage", map[string]any{"ticket": 101}))
			// 57 bytes as JSON: {"event":"read_ticket","data":{"ticket":101,"words":120}}
			return st.call("append_trace", map[string]any{"run_id": run, "step_id": "classify", "entries": []any{
				map[string]any{"event": "read_ticket", "data": map[string]any{"ticket": 101, "words": 120}},
			}})
		},
	},
	{
		golden: "advance_run_act", workflows: []string{"approval"},
		run: func(t *testing.T, st *stack) any {
			opened := st.start("approval", nil)
			gate, token := gateOf(t, opened)
			r := st.respond(runID(opened), gate, "approve", token)
			actions, _ := r["next_actions"].([]any)
			if len(actions) == 0 {
				t.Fatalf("the answer offered nothing: %s", pretty(r))
			}
			return actions[len(actions)-1] // "It is always LAST"
		},
	},
	{
		// The seed's table: step_claims is there when "The run is open and
		// a step is in progress" — "A step whose question is open names the
		// program through which the question was opened". Its example
		// shows none, as its gate example shows no claim_token: the store
		// it came from kept no claims (see gate_opened).
		golden: "run_state_gate_waiting", workflows: []string{"triage"},
		opts: Options{Elided: []string{"step_claims"}},
		run: func(t *testing.T, st *stack) any {
			opened := triageToGate(t, st)
			return st.call("get_run_state", map[string]any{"run_id": runID(opened)})
		},
	},
	{
		// "For the same run after it completed, pending_gate is gone and two
		// fields are added".
		golden: "run_state_completed", workflows: []string{"triage"},
		opts: Options{Fragment: true, Absent: []string{"pending_gate"}},
		run: func(t *testing.T, st *stack) any {
			opened := triageToGate(t, st)
			run := runID(opened)
			gate, token := gateOf(t, opened)
			if r := st.respond(run, gate, "send", token); r["status"] != "ok" {
				t.Fatalf("answer: %s", pretty(r))
			}
			if r := st.call("advance_run", map[string]any{"run_id": run}); r["run_phase"] != "completed" {
				t.Fatalf("advance_run: %s", pretty(r))
			}
			return st.call("get_run_state", map[string]any{"run_id": run})
		},
	},
	{
		golden: "run_state_skip_details", workflows: []string{"defaulted"}, opts: Options{Fragment: true},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("defaulted", nil))
			if r := st.execute(run, "classify", map[string]any{"category": "spam", "confidence": 0.9}); r["settled_by_default"] != true {
				t.Fatalf("classify was not settled by default: %s", pretty(r))
			}
			return st.call("get_run_state", map[string]any{"run_id": run})
		},
	},
	{
		// "For an agent step whose output a caller passed in over MCP, the
		// attempt has no cost": the seed's caller was ana on build-01 over
		// stdio, as in gate_claim.
		golden: "run_state_attempt", workflows: []string{"triage"},
		door: door{stdio: true, caller: &realmv1.Caller{By: "ana@build-01", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_STDIO}},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("triage", map[string]any{"ticket": 101}))
			if r := st.execute(run, "classify", map[string]any{"category": "billing", "confidence": 0.9}); r["status"] != "ok" {
				t.Fatalf("classify: %s", pretty(r))
			}
			s := st.call("get_run_state", map[string]any{"run_id": run, "include_steps": true})
			steps, _ := s["steps"].(map[string]any)
			classify, _ := steps["classify"].(map[string]any)
			attempts, _ := classify["attempts"].([]any)
			if len(attempts) != 1 {
				t.Fatalf("steps.classify.attempts: want one attempt: %s", pretty(s))
			}
			return attempts[0]
		},
	},
	{
		// terminal_reason: "The run has ended, unless a guard aborted it".
		golden: "run_state_abort_context", workflows: []string{"quote"},
		opts: Options{Fragment: true, Absent: []string{"terminal_reason"}},
		run: func(t *testing.T, st *stack) any {
			run := runID(st.start("quote", nil))
			st.execute(run, "quote", map[string]any{"amount": 5000})
			return st.call("get_run_state", map[string]any{"run_id": run})
		},
	},
}

// TestRepliesMatchTheSeedsExamples drives each golden's situation through
// the MCP tools against a real engine on each store and compares the reply
// with the seed's example, field by field (see harness.go).
func TestRepliesMatchTheSeedsExamples(t *testing.T) {
	t.Parallel()
	for _, sc := range scenarios {
		t.Run(sc.golden, func(t *testing.T) {
			t.Parallel()
			want, err := Load("testdata", sc.golden)
			if err != nil {
				t.Fatal(err)
			}
			eachBackend(t, func(t *testing.T, backend string) {
				st := newStackVia(t, backend, sc.door, sc.workflows...)
				got := sc.run(t, st)
				if diffs := Compare(want, got, sc.opts); len(diffs) > 0 {
					note := ""
					if sc.known != "" {
						note = "\n" + sc.known
					}
					t.Errorf("%s%s\nthe reply:\n%s", Report(sc.golden, diffs), note, pretty(got))
				}
			})
		})
	}
}

// TestEveryGoldenHasAScenario keeps testdata and the table in step.
func TestEveryGoldenHasAScenario(t *testing.T) {
	t.Parallel()
	files, err := filepathGlob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, sc := range scenarios {
		have[sc.golden] = true
	}
	for _, f := range files {
		if !have[f] {
			t.Errorf("testdata/%s.json has no scenario", f)
		}
	}
	if len(files) != len(scenarios) {
		t.Errorf("%d goldens, %d scenarios", len(files), len(scenarios))
	}
}
