package realmtest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The examples' fixtures pass on the examples (orders, whose handler lives
// in example-runner, is tested there).
func TestExamplesFixturesPass(t *testing.T) {
	t.Parallel()
	for _, wf := range []string{"refund", "support-reply", "triage", "lease-quotes", "invoice-notes"} {
		t.Run(wf, func(t *testing.T) {
			t.Parallel()
			results := Run(t, filepath.Join("..", "..", "examples", wf+".yaml"), filepath.Join("..", "..", "examples", "fixtures", wf), Options{})
			if len(results) < 2 {
				t.Fatalf("%s: %d fixtures ran", wf, len(results))
			}
		})
	}
}

// Mocked services answer from the fixture and record the calls; agent
// errors are injected before the answer; gates take the fixture's choice.
func TestMocksAgentErrorsAndGates(t *testing.T) {
	t.Parallel()
	results := Run(t, filepath.Join("testdata", "orders-svc.yaml"), filepath.Join("testdata", "fixtures"), Options{})
	if len(results) != 3 {
		t.Fatalf("ran %d fixtures, want 3 (README.md is not one)", len(results))
	}
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	calls := byName["approved refund"].Calls
	// The injected agent error is on the record as a failed drive.
	s := OpenT(t, filepath.Join("testdata", "orders-svc.yaml"), Options{})
	f, err := LoadFixture(filepath.Join("testdata", "fixtures", "approved.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := s.Run(context.Background(), f)
	exp, err := s.eng.Engine().ExportRun(context.Background(), &realmv1.ExportRunRequest{RunId: res.RunID})
	if err != nil || !res.Passed {
		t.Fatal(err, res)
	}
	if !strings.Contains(string(exp.GetBundle()), "provider timed out after 30s") {
		t.Errorf("the injected error is not in the record: %s", exp.GetBundle())
	}
	if len(calls) != 1 || calls[0].Service != "orders" || calls[0].Method != "fetch" || calls[0].Operation != "get_order" || calls[0].Params["id"] != "A-17" {
		t.Errorf("mock calls: %+v", calls)
	}
}

// Each way a fixture can fail says so in the spec's words.
func TestFailuresNameTheCause(t *testing.T) {
	t.Parallel()
	s := OpenT(t, filepath.Join("testdata", "orders-svc.yaml"), Options{})
	for _, tc := range []struct{ file, want string }{
		{"wrong-phase.yaml", "assertFinalState: expected phase 'failed' but run is in phase 'completed'"},
		{"no-answer.yaml", "Invalid input for step 'decide'"},
		{"unmocked.yaml", "Adapter 'orders_api' for service 'orders' is not registered. Declare this adapter under 'adapters:' in realm.yaml at your deployment root."},
		{"bad-choice.yaml", "Choice 'maybe' is not valid. Expected one of: approve, reject"},
		{"missing-evidence.yaml", "Expected evidence for step 'fetch' with status 'error' not found"},
		{"wrong-skips.yaml", `Expected skipped_steps ["fetch"] but got []`},
		{"unknown-operation.yaml", "MockServiceRecorder: no response configured for operation 'get_order'"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := LoadFixture(filepath.Join("testdata", "failing", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res := s.Run(context.Background(), f)
			if res.Passed {
				t.Fatalf("passed: %+v", res)
			}
			if head, _, _ := strings.Cut(res.Error, "\n"); head != tc.want {
				t.Errorf("error:\n got %q\nwant %q", res.Error, tc.want)
			}
		})
	}
}

func TestParseFixture(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, err string }{
		{"no name", "expected: {final_state: completed}", `Fixture must have a non-empty string "name" field`},
		{"blank name", "name: ' '\nexpected: {final_state: completed}", `Fixture must have a non-empty string "name" field`},
		{"no final state", "name: x\nexpected: {}", `Fixture must have an "expected.final_state" string field`},
		{"final state not a string", "name: x\nexpected: {final_state: 3}", `Fixture must have an "expected.final_state" string field`},
		{"defaults", "name: x\nexpected: {final_state: completed}\nextra: ignored", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFixture([]byte(tc.yaml))
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Params == nil || f.Mocks == nil || f.AgentResponses == nil || f.Expected.SkippedSteps != nil {
				t.Errorf("defaults not filled: %+v", f)
			}
		})
	}
	if _, err := LoadFixturesFromDir("nope"); err == nil || err.Error() != "Fixture directory does not exist: nope" {
		t.Errorf("missing dir: %v", err)
	}
}
