package golden

import (
	"testing"
)

// The goldens mask run_version; these tests check its values as seed 000
// gives them: "A number that rises each time the run is changed", a refused
// answer "counts the refusal on the run, a write, and replies the number
// from before that write, so the next reply that reads the run shows a
// number at least one higher", "The refusal that uses up the step's limit
// (VALIDATION_EXHAUSTED) replies the number after its writes", and "0 when
// the reply names no run's state". advance_run on a run that owes nothing
// "runs nothing and returns the run's view": it is the read.

// step is one call and the run_version its reply must carry.
type step struct {
	what    string
	call    func(st *stack, run string) map[string]any
	version float64
	check   func(r map[string]any) bool // the reply is the one meant
}

func versionOf(t *testing.T, r map[string]any) float64 {
	t.Helper()
	v, ok := r["run_version"].(float64)
	if !ok {
		t.Fatalf("no run_version in %s", pretty(r))
	}
	return v
}

func advance(st *stack, run string) map[string]any {
	return st.call("advance_run", map[string]any{"run_id": run})
}

func status(want string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["status"] == want }
}

func code(want string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["error_code"] == want }
}

func TestRunVersionRisesAsTheSeedSays(t *testing.T) {
	t.Parallel()
	badClassify := func(st *stack, run string) map[string]any {
		return st.execute(run, "classify", map[string]any{"category": "spam", "confidence": 0.5})
	}
	cases := []struct {
		name     string
		workflow string
		steps    []step
	}{
		{
			name: "a refused answer replies the number from before its write and the next read is one higher", workflow: "triage",
			steps: []step{
				{"first refusal", badClassify, 0, code("VALIDATION_INPUT_SCHEMA")},
				{"read after it", advance, 1, status("ok")},
				{"second refusal", badClassify, 1, code("VALIDATION_INPUT_SCHEMA")},
				{"read after it", advance, 2, status("ok")},
				{"accepted answer", func(st *stack, run string) map[string]any {
					return st.execute(run, "classify", map[string]any{"category": "bug", "confidence": 0.5})
				}, 3, status("ok")},
			},
		},
		{
			name: "the refusal that uses up the limit replies the number after its writes", workflow: "exhausting",
			steps: []step{
				{"first refusal", func(st *stack, run string) map[string]any {
					return st.execute(run, "classify", map[string]any{"category": "spam"})
				}, 0, code("VALIDATION_INPUT_SCHEMA")},
				{"exhausting refusal", func(st *stack, run string) map[string]any {
					return st.execute(run, "classify", map[string]any{"category": "spam"})
				}, 2, code("VALIDATION_EXHAUSTED")},
				{"read after it", advance, 2, func(r map[string]any) bool { return r["run_phase"] == "failed" }},
			},
		},
		{
			name: "each write raises the number by one and a read leaves it", workflow: "triage",
			steps: []step{
				{"classify", func(st *stack, run string) map[string]any {
					return st.execute(run, "classify", map[string]any{"category": "bug", "confidence": 0.5})
				}, 1, status("ok")},
				{"draft opens its gate", func(st *stack, run string) map[string]any {
					return st.execute(run, "draft", map[string]any{"reply": "Fixed."})
				}, 2, status("confirm_required")},
				{"read at the gate", advance, 2, func(r map[string]any) bool { return r["run_phase"] == "gate_waiting" }},
				{"answer", func(st *stack, run string) map[string]any {
					s := st.call("get_run_state", map[string]any{"run_id": run})
					g, _ := s["pending_gate"].(map[string]any)
					gate, _ := g["gate_id"].(string)
					return st.respond(run, gate, "send", "")
				}, 3, status("ok")},
				{"advance runs send", advance, 4, func(r map[string]any) bool { return r["run_phase"] == "completed" }},
				{"read of the ended run", advance, 4, func(r map[string]any) bool { return r["run_phase"] == "completed" }},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, backend string) {
				st := newStack(t, backend, tc.workflow)
				started := st.start(tc.workflow, nil)
				if v := versionOf(t, started); v != 0 {
					t.Fatalf("start_run run_version = %v, want 0 (seed: a new run on which nothing ran)", v)
				}
				run := runID(started)
				for _, s := range tc.steps {
					r := s.call(st, run)
					if !s.check(r) {
						t.Fatalf("%s: not the reply meant: %s", s.what, pretty(r))
					}
					if v := versionOf(t, r); v != s.version {
						t.Errorf("%s: run_version = %v, want %v", s.what, v, s.version)
					}
				}
			})
		})
	}
}

func TestRepliesThatNameNoRunsStateCarryVersionZeroOrNone(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		st := newStack(t, backend, "triage")
		const missing = "00000000-0000-4000-8000-000000000000"

		r := st.call("start_run", map[string]any{"workflow_id": "nope"})
		if r["error_code"] != "STATE_WORKFLOW_NOT_FOUND" || r["run_id"] != "" || r["run_version"] != float64(0) {
			t.Errorf("start_run of an unknown workflow: want STATE_WORKFLOW_NOT_FOUND, run_id \"\", run_version 0: %s", pretty(r))
		}
		r = st.execute(missing, "classify", map[string]any{})
		if r["error_code"] != "STATE_RUN_NOT_FOUND" || r["run_id"] != missing || r["run_version"] != float64(0) {
			t.Errorf("execute_step on a missing run: want STATE_RUN_NOT_FOUND, its run_id, run_version 0: %s", pretty(r))
		}
		for _, tool := range []string{"get_run_state", "abandon_run"} {
			r = st.call(tool, map[string]any{"run_id": missing})
			if _, has := r["run_version"]; has || r["status"] != "error" {
				t.Errorf("%s on a missing run: want a refusal with no run_version: %s", tool, pretty(r))
			}
		}
	})
}
