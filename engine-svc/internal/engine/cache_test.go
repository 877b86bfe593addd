package engine

import (
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/record"
)

// The run cache keeps the runs that will take another transition, and
// lets go of an ended run that owes nothing (it would only weigh on every
// garbage collection).
func TestTheRunCacheKeepsOnlyRunsThatTakeMoreTransitions(t *testing.T) {
	ended := func(ledger map[string]*record.FinalizerStatus) *record.Run {
		return &record.Run{ID: "r1", TerminalState: true, FinalizerLedger: ledger}
	}
	tests := []struct {
		name string
		run  *record.Run
		keep bool
	}{
		{"a running run is kept", &record.Run{ID: "r1"}, true},
		{"a run waiting at a gate is kept", &record.Run{ID: "r1", PendingGate: &record.PendingGate{StepName: "approve"}}, true},
		{"an ended run that owes nothing is let go", ended(nil), false},
		{"an ended run whose finalizers are delivered is let go", ended(map[string]*record.FinalizerStatus{
			"cleanup": {Status: ledgerCompleted}, "notify": {Status: ledgerFailed}}), false},
		{"an ended run that still owes a finalizer is kept", ended(map[string]*record.FinalizerStatus{
			"cleanup": {Status: ledgerCompleted}, "notify": {Status: ledgerPending, Rank: 1}}), true},
		{"an abandoned run is let go", &record.Run{ID: "r1", AbandonedAt: "2026-12-07T00:00:00Z"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run.Normalize()
			if got := worthCaching(tt.run); got != tt.keep {
				t.Errorf("worthCaching = %v, want %v (phase %s)", got, tt.keep, tt.run.Phase())
			}
		})
	}
}
