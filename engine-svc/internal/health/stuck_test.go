package health

import (
	"slices"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/workflow"
)

// TestStuckReproducesSeedLines rebuilds the runs behind the seed's
// `realm run list --stuck` lines and checks what ends each line.
func TestStuckReproducesSeedLines(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 0, 54, 0, 0, time.UTC)
	tests := []struct {
		name string
		run  func() *record.Run
		want string
	}{
		{
			name: "a claim of unknown age",
			run: func() *record.Run {
				r := run("2026-10-01T23:43:14.000Z")
				r.MarkInProgress("fetch", &record.Claim{Token: "t"})
				return r
			},
			want: "  fetch=claim_unknown_age",
		},
		{
			name: "a gate expired with abort",
			run: func() *record.Run {
				r := run("2026-10-01T23:39:37.000Z")
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve", ExpiresAt: "2026-10-01T23:40:37.000Z", OnExpiry: "abort"}
				return r
			},
			want: "  approve=gate_expired(abort) (realm run advance)",
		},
		{
			name: "a stale sibling of an open gate",
			run: func() *record.Run {
				r := run("2026-10-01T23:38:47.000Z")
				r.MarkInProgress("approve", &record.Claim{Token: "g"})
				r.MarkInProgress("fetch", &record.Claim{Token: "t", Deadline: str("2026-10-01T23:53:47.000Z")})
				r.PendingGate = &record.PendingGate{GateID: "g1", StepName: "approve"}
				return r
			},
			want: "  fetch=claim_stale",
		},
		{
			name: "an idle run: nothing after idle",
			run:  func() *record.Run { return run("2026-09-29T23:39:44.000Z") },
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := Stuck(Input{Run: tt.run(), Def: def(agent("approve"), agent("fetch")), Now: now})
			if len(ls) == 0 {
				t.Fatal("the run should be stuck")
			}
			if got := StuckSuffix(ls); got != tt.want {
				t.Errorf("suffix %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStuckLabels(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	recent := "2026-10-02T11:59:00.000Z"
	tests := []struct {
		name  string
		input func() Input
		want  string
	}{
		{
			name: "settle_default expiry",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g", StepName: "approve", ExpiresAt: recent, OnExpiry: "settle_default"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			want: "  approve=gate_expired(settle_default) (realm run advance)",
		},
		{
			name: "expiry with no on_expiry is answered with respond",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g", StepName: "approve", ExpiresAt: recent}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			want: "  approve=gate_expired(finding_only) (realm run respond)",
		},
		{
			name: "a corrupt on_expiry renders unknown",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g", StepName: "approve", ExpiresAt: recent, OnExpiry: "explode"}
				return Input{Run: r, Def: def(agent("approve")), Now: now}
			},
			want: "  approve=gate_expired(unknown) (realm run advance)",
		},
		{
			name: "a capability block is read from the record alone",
			input: func() Input {
				r := run(recent)
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {Requirement: record.Requirement{Kind: "handler", Name: "order_totl"}}}
				return Input{Run: r, Def: def(agent("total")), Now: now, Capable: func(string) bool { return true }}
			},
			want: "  total: needs handler 'order_totl'",
		},
		{
			name: "a corrupt requirement kind renders (unknown)",
			input: func() Input {
				r := run(recent)
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"total": {Requirement: record.Requirement{Kind: "gizmo", Name: "x"}}}
				return Input{Run: r, Def: def(agent("total")), Now: now}
			},
			want: "  total: needs (unknown) 'x'",
		},
		{
			name: "a drive failing",
			input: func() Input {
				return Input{Run: run(recent), Def: def(agent("classify")), Now: now,
					DriveFailures: &DriveFailures{Total: 2, Entries: []DriveFailure{{At: recent, Step: "classify", ErrorClass: "connection_timeout"}}}}
			},
			want: "  classify=drive_failing(connection_timeout)",
		},
		{
			name: "an unreadable definition",
			input: func() Input {
				return Input{Run: run(recent), Now: now}
			},
			want: "  definition_unresolvable (not_found) (realm run inspect run-1)",
		},
		{
			name: "owed finalizers join in one family",
			input: func() Input {
				r := run(recent)
				r.Seal("complete", "", "Workflow completed.")
				r.FinalizerLedger = map[string]*record.FinalizerStatus{
					"b": {Status: "pending", Rank: 1, LeaseToken: "l", LeaseDeadline: "2026-10-02T12:00:30.000Z"},
					"a": {Status: "pending", Rank: 0},
				}
				return Input{Run: r, Def: def(agent("x")), Now: now}
			},
			want: "  a=never_leased (realm run drain), b=lease_held (realm run drain)",
		},
		{
			name: "an ended run with a stale gate",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g", StepName: "x"}
				r.Seal("complete", "", "Workflow completed.")
				return Input{Run: r, Def: def(agent("x")), Now: now}
			},
			want: "  x=stale_gate (realm run purge)",
		},
		{
			name: "an open corrupt gate",
			input: func() Input {
				r := run(recent)
				r.PendingGate = &record.PendingGate{GateID: "g", StepName: "x"}
				r.ResolvedGates = map[string]*record.ResolvedGate{"g": {Step: "x"}}
				return Input{Run: r, Def: def(agent("x")), Now: now}
			},
			want: "  x=gate_corruption",
		},
		{
			name: "claims join in one family, other families two spaces apart",
			input: func() Input {
				r := run(recent)
				r.MarkInProgress("a", &record.Claim{Token: "t", Deadline: str("2026-10-02T11:00:00.000Z")})
				r.MarkInProgress("b", &record.Claim{Token: "t"})
				r.CapabilityBlocks = map[string]*record.CapabilityBlock{"c": {Requirement: record.Requirement{Kind: "adapter", Name: "slack"}}}
				return Input{Run: r, Def: def(agent("a"), agent("b"), agent("c")), Now: now}
			},
			want: "  a=claim_stale, b=claim_unknown_age  c: needs adapter 'slack'",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := Stuck(tt.input())
			if len(ls) == 0 {
				t.Fatal("the run should be stuck")
			}
			if got := StuckSuffix(ls); got != tt.want {
				t.Errorf("suffix\n got: %q\nwant: %q", got, tt.want)
			}
		})
	}
}

// TestStuckLeavesOutWhatDoesNotSelect: the findings that never select a run
// and the two that need the workflow put no run on the list.
func TestStuckLeavesOutWhatDoesNotSelect(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC)
	recent := "2026-10-02T11:59:00.000Z"

	completed := run(recent)
	completed.FailedSteps = []string{"a"}
	completed.Seal("complete", "", "Workflow completed.")
	ents := []*record.Entry{{StepID: "b", Diagnostics: map[string]any{"structured_output": map[string]any{"requested": true, "sent": false, "downgrade_reason": "compat_endpoint"}}}}
	if ls := Stuck(Input{Run: completed, Def: def(agent("a")), Now: now, Entries: ents}); len(ls) != 0 {
		t.Errorf("completed_with_failed_steps and structured_output_downgraded select no run, got %v", ls)
	}

	guarded := run(recent)
	g := &workflow.Step{Name: "limit", Execution: workflow.KindGuard}
	bad := agent("review")
	bad.Trust = "human_confirm"
	in := Input{Run: guarded, Def: def(g, bad), Now: now}
	if fs := Classify(in); len(fs) != 2 {
		t.Fatalf("classify should find both, got %v", kinds(fs))
	}
	if ls := Stuck(in); len(ls) != 0 {
		t.Errorf("guard_awaiting_settlement and trust_value_invalid are not found by list, got %v", ls)
	}
}

func TestStuckPutsTheIdleLabelFirstAndEmpty(t *testing.T) {
	t.Parallel()
	r := run("2026-09-01T00:00:00.000Z")
	r.CapabilityBlocks = map[string]*record.CapabilityBlock{"t": {Requirement: record.Requirement{Kind: "handler", Name: "h"}}}
	ls := Stuck(Input{Run: r, Def: def(agent("t")), Now: time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)})
	got := make([]string, len(ls))
	for i, l := range ls {
		got[i] = l.Kind
	}
	if want := []string{KindNeverClaimedIdle, KindCapabilityBlock}; !slices.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	if ls[0].Text != "" {
		t.Errorf("never_claimed_idle has no label text, got %q", ls[0].Text)
	}
	if got := StuckSuffix(ls); got != "  t: needs handler 'h'" {
		t.Errorf("suffix %q", got)
	}
}

func TestInspectBlockListsEveryFindingWithItsStep(t *testing.T) {
	t.Parallel()
	fs := []Finding{
		{Kind: KindStaleClaim, Step: "fetch", Reason: "claim_stale"},
		{Kind: KindDefinitionUnresolvable, Reason: "Workflow 'x' not found."},
	}
	want := "Run Health (2 finding(s)):\n  stale_claim [fetch]: claim_stale\n  definition_unresolvable: Workflow 'x' not found.\n"
	if got := InspectBlock(fs); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
