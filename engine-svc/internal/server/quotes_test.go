package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const lease = "The tenant shall pay a rent of €1,200 per month. The rent is paid quarterly in advance. This lease runs for three years."

// The seed's lease-quotes workflow, end to end: the agent extracts, the
// built-in check_quotes runs, and the guard on all_found decides.
func TestLeaseQuotesFoundCompletesAndMissingAborts(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/lease-quotes.yaml")); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		cases := []struct {
			name   string
			quote  string
			phase  realmv1.RunPhase
			hint   string
			status string
		}{
			{"found", "The rent is paid quarterly in advance.", realmv1.RunPhase_RUN_PHASE_COMPLETED, "Guard step 'stop_if_not_found' passed and completed the run.", "exact"},
			{"not found", "The rent is paid monthly.", realmv1.RunPhase_RUN_PHASE_ABORTED, "Guard step 'stop_if_not_found' aborted the run.", "not_found"},
		}
		for _, c := range cases {
			run := start(t, e, "lease-quotes", map[string]any{"text": lease})
			if !strings.Contains(run.GetNextActions()[0].GetPrompt(), "€1,200 per month") {
				t.Fatalf("%s: prompt = %q", c.name, run.GetNextActions()[0].GetPrompt())
			}
			r := step(t, e, run.GetRunId(), "extract_fields", map[string]any{"fields": []any{
				map[string]any{"field": "payment", "value": "quarterly", "quote": c.quote},
			}})
			if r.GetRunPhase() != c.phase || r.GetContextHint() != c.hint {
				t.Fatalf("%s: reply = %v", c.name, r)
			}
			snap, err := e.st.LoadRun(ctx(t), run.GetRunId())
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				AllFound bool `json:"all_found"`
				Results  []struct {
					QuoteCheck struct {
						State string `json:"state"`
					} `json:"quote_check"`
				} `json:"results"`
			}
			if err := json.Unmarshal(snap.Outputs["quote_check"], &out); err != nil {
				t.Fatalf("%s: quote_check output %s: %v", c.name, snap.Outputs["quote_check"], err)
			}
			if len(out.Results) != 1 || out.Results[0].QuoteCheck.State != c.status || out.AllFound != (c.status == "exact") {
				t.Errorf("%s: quote_check output = %s", c.name, snap.Outputs["quote_check"])
			}
		}
	})
}
