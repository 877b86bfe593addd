package drive

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
)

// The driver's sentences of agent driver §9 and §15, word for word.
func TestDriverLinesAreTheSpecsWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, got, want string
	}{
		{"repair budget past the threshold", repairBudgetLine("classify", 6, 6),
			"  ⚠ --schema-retries 6 (repair budget 7 attempts) exceeds step 'classify''s validation-exhaustion threshold (6) — the engine will terminalize this step before the repair loop's own budget is exhausted."},
		{"repair budget within the threshold", repairBudgetLine("classify", 5, 6), ""},
		{"taken", takenLine("file", "ana (from the OS user, via agent)", "2026-10-02T01:00:00.000Z"),
			"• Step 'file' was taken by ana (from the OS user, via agent) at 2026-10-02T01:00:00.000Z; not run here."},
		{"in flight", inFlightLine("r-1", "file", "ana (as stated, via mcp)", "2026-10-02T01:00:00.000Z", false, 60*time.Second),
			"• Step 'file' has been in flight since 2026-10-02T01:00:00.000Z, taken by ana (as stated, via mcp); the record has not changed for 60s. If the program that took it is gone: realm run reclaim r-1 --step file --force"},
		{"in flight, claim past its deadline", inFlightLine("r-1", "file", "ana (as stated, via mcp)", "2026-10-02T01:00:00.000Z", true, 60*time.Second),
			"• Step 'file' has been in flight since 2026-10-02T01:00:00.000Z, taken by ana (as stated, via mcp); the record has not changed for 60s. Its claim is past its deadline (its runner likely died). If the program that took it is gone: realm run reclaim r-1 --step file --force"},
		{"blocked on a handler", capabilityBlockedLine("file", "handler", "file_ticket", "realm agent --run-id r-1 --provider anthropic --model m"),
			"⚠ Step 'file' is blocked: handler 'file_ticket' is not registered in this runner. The run is NOT failed — add handler 'file_ticket' and re-attach (`realm agent --run-id r-1 --provider anthropic --model m`)."},
		{"refused before its claim", cannotRunLine(refusedStep{"file", "input_schema", "'priority' must be integer"}),
			"• Step 'file' cannot run (input_schema): 'priority' must be integer"},
		{"refused here for capability", cannotRunLine(refusedStep{"file", "capability", "handler 'file_ticket' is not registered"}),
			"• Step 'file' cannot run here (capability): handler 'file_ticket' is not registered"},
		{"the drive stops", driveStopsLine("r-1", "running", refusedStep{"file", "input_schema", "x"}),
			"✗ The drive stops: nothing else can run, and 'file' cannot run (input_schema). Run r-1 stays open (phase 'running'): correct the workflow, register it again, then realm run advance r-1; or end it: realm run abandon r-1."},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.got != c.want {
				t.Errorf("got\n%s\nwant\n%s", c.got, c.want)
			}
		})
	}
}

// claimOf reads the holder, since and staleness of a step's claim from
// get_run_state; a step with no claim names nobody.
func TestClaimOfReadsTheRunState(t *testing.T) {
	t.Parallel()
	extra, err := structpb.NewStruct(map[string]any{
		"step_claims": []any{map[string]any{"step": "file", "since": "2026-10-02T01:00:00.000Z",
			"holder": map[string]any{"by": "ana", "by_source": "derived", "channel": "agent"}}},
		"stuck_claims": []any{map[string]any{"step": "file", "state": "claim_stale"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &realmv1.RunState{Extra: extra}
	if p, s, stale := claimOf(st, "file"); p != "ana (from the OS user, via agent)" || s != "2026-10-02T01:00:00.000Z" || !stale {
		t.Errorf("claimOf(file) = %q %q %v", p, s, stale)
	}
	if p, s, stale := claimOf(st, "other"); p != identity.UnprintableName || s != "an unknown time" || stale {
		t.Errorf("claimOf(other) = %q %q %v", p, s, stale)
	}
}
