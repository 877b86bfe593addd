// Package health computes a run's health findings (seed "Run state and
// health findings", run-record spec §11.3): the things Realm notices about
// a run that someone may need to act on. Findings are derived from the run
// record, its definition and the clock on every read, never stored.
//
// Classify gives the findings, in catalogue order; Stuck gives the labels
// `realm run list --stuck` prints (cli spec §3.1); InspectBlock renders the
// `Run Health` block of `realm run inspect` (cli spec §3.2).
package health

// The 14 finding kinds.
const (
	KindNeverClaimedIdle           = "never_claimed_idle"
	KindDriveFailing               = "drive_failing"
	KindStaleClaim                 = "stale_claim"
	KindWedgedGateSibling          = "wedged_gate_sibling"
	KindCapabilityBlock            = "capability_block"
	KindGateExpiredAwaitingDrive   = "gate_expired_awaiting_drive"
	KindGuardAwaitingSettlement    = "guard_awaiting_settlement"
	KindTrustValueInvalid          = "trust_value_invalid"
	KindDefinitionUnresolvable     = "definition_unresolvable"
	KindGateCorruption             = "gate_corruption"
	KindStructuredOutputDowngraded = "structured_output_downgraded"
	KindTerminalPendingFinalizer   = "terminal_pending_finalizer"
	KindCompletedWithFailedSteps   = "completed_with_failed_steps"
	KindTerminalWithStaleGate      = "terminal_with_stale_gate"
)

// Which runs a finding is looked for on.
type scope int

const (
	openRuns  scope = iota // the run has not ended
	endedRuns              // the run has ended
	anyRun                 // both (structured_output_downgraded alone)
)

// entry is one row of the catalogue: what a kind applies to and how
// `list --stuck` treats it.
type entry struct {
	kind  string
	scope scope
	// needsDef: the finding reads the workflow, so `list --stuck` (which
	// reads none) never finds it.
	needsDef bool
	// selects: the finding puts a run on the `list --stuck` list.
	selects bool
	// family groups labels on a `--stuck` line: same-family labels are
	// joined with ", ", families with two spaces (cli spec §3.1).
	family string
	find   func(*classifier) []Finding
}

// catalogue is the 14 findings in the order the seed lists them; Classify
// returns findings in this order (the seed gives no order of its own), and
// within one kind in step order.
var catalogue = []entry{
	{KindNeverClaimedIdle, openRuns, false, true, "idle", (*classifier).neverClaimedIdle},
	{KindDriveFailing, openRuns, false, true, "drive", (*classifier).driveFailing},
	{KindStaleClaim, openRuns, false, true, "claim", (*classifier).staleClaims},
	{KindWedgedGateSibling, openRuns, false, true, "claim", (*classifier).wedgedSiblings},
	{KindCapabilityBlock, openRuns, false, true, "capability", (*classifier).capabilityBlocks},
	{KindGateExpiredAwaitingDrive, openRuns, false, true, "gate_expired", (*classifier).gateExpired},
	{KindGuardAwaitingSettlement, openRuns, true, false, "", (*classifier).guardsAwaiting},
	{KindTrustValueInvalid, openRuns, true, false, "", (*classifier).trustInvalid},
	{KindDefinitionUnresolvable, openRuns, false, true, "definition", (*classifier).definitionUnresolvable},
	{KindGateCorruption, openRuns, false, true, "gate", (*classifier).gateCorruption},
	{KindStructuredOutputDowngraded, anyRun, false, false, "", (*classifier).structuredOutputDowngraded},
	{KindTerminalPendingFinalizer, endedRuns, false, true, "finalizer", (*classifier).pendingFinalizers},
	{KindCompletedWithFailedSteps, endedRuns, false, false, "", (*classifier).completedWithFailed},
	{KindTerminalWithStaleGate, endedRuns, false, true, "gate", (*classifier).staleGate},
}

// Kinds returns the 14 kinds in catalogue order.
func Kinds() []string {
	out := make([]string, len(catalogue))
	for i, e := range catalogue {
		out[i] = e.kind
	}
	return out
}

func lookup(kind string) (entry, bool) {
	for _, e := range catalogue {
		if e.kind == kind {
			return e, true
		}
	}
	return entry{}, false
}
