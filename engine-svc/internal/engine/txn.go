package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/realm-go/realm/pkg/condition"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// txn is one decision on one run, in three parts: what was read (snap),
// what the decision will write (pending), and what it did that the reply
// reports (effects). It lives for one attempt of update; a verb decides on
// it, update commits pending, and the verb's outcome is composed into the
// reply from the committed state.
type txn struct {
	e *Engine
	snap
	pending
	effects
	// caller is the program behind the act, stamped on claims and evidence.
	caller *realmv1.Caller
}

// snap is what a transaction read: the run (cloned, so deciding may change
// it), its definition, outputs, trace buffers and the live runners, all as
// of one moment. Deciding reads nothing else.
type snap struct {
	base *store.Snapshot
	// prior is the run as base holds it (shared with the cache: never
	// changed); nil for a run this transaction creates.
	prior  *record.Run
	run    *record.Run
	def    *compiled
	defErr error
	// outputs are the recorded outputs by step (decoded), including the
	// ones this transaction adds.
	outputs map[string]any
	// traces are the buffered trace entries by step (raw JSON), as this
	// transaction leaves them.
	traces map[string][]byte
	// Both maps start as the cache's own (shared: never changed) and are
	// copied on the transaction's first change to each (setOutput,
	// setBuffered) when these are unset.
	ownOutputs, ownTraces bool
	// attempts is the refused-answers list (attempts.go).
	attempts []byte
	now      time.Time
	// nowText is now as the record writes it (stamp), formatted once.
	nowText string
	// wasTerminal is whether the run had ended before this transaction.
	wasTerminal bool
	// caps is which handlers and adapters live runners serve.
	caps capabilities
	// scopeCache is what conditions read, built once per change.
	scopeCache *condition.Scope
}

// pending is what the transaction will write, in one compare-and-set: the
// run document (snap.run as changed) plus these.
type pending struct {
	dirty bool
	// newOutputs names the steps whose output this write sets (the
	// values are in snap.outputs); most writes set one, held in oneOutput.
	newOutputs    []string
	oneOutput     [1]string
	newTraces     map[string][]byte
	attemptsDirty bool
	evidence      []*record.Entry
	oneEvidence   [1]*record.Entry // evidence's first array: most writes add one
	index         []store.IndexOp
	idemKey       string
	idemExpect    string
	create        bool
	// carriedDef is the definition a created run carries (carried.go),
	// written once with the create.
	carriedDef []byte
	// maint marks a maintenance rewrite (gc --heal, migrate --stamp-seals):
	// the record's meaning is unchanged, so it never starts a finalizer
	// ledger; keepUpdatedAt also leaves updated_at as it was (a stamped
	// seal is not activity).
	maint, keepUpdatedAt bool
	// encoded memoises the JSON of maps this write stores (encode.go),
	// its first entries in encodedA.
	encoded  []encodedMap
	encodedA [2]encodedMap
}

// touch marks the transaction as a write; what conditions read may have
// changed, so the cached scope is dropped.
func (t *txn) touch() {
	t.dirty = true
	t.scopeCache = nil
}

// owned is m, copied first unless *own says the transaction copied it
// already (snap's outputs and traces start as the cache's).
func owned[V any](m map[string]V, own *bool) map[string]V {
	if !*own {
		m, *own = maps.Clone(m), true
	}
	if m == nil {
		m = map[string]V{}
	}
	return m
}

// stamp is the transaction's time as the record writes it.
func (t *txn) stamp() string {
	if t.nowText == "" {
		t.nowText = record.FormatTime(t.now)
	}
	return t.nowText
}

// setOutput records a step's output.
func (t *txn) setOutput(step string, v any) {
	if t.newOutputs == nil {
		t.newOutputs = t.oneOutput[:0]
	}
	if !slices.Contains(t.newOutputs, step) {
		t.newOutputs = append(t.newOutputs, step)
	}
	t.outputs = owned(t.outputs, &t.ownOutputs)
	t.outputs[step] = v
	t.touch()
}

// appendEvidence adds an entry to the record.
func (t *txn) appendEvidence(e *record.Entry) {
	t.stampDefinition(e)
	if e.EvidenceHash == "" {
		b, _ := t.encodeJSON(e.OutputSummary)
		e.EvidenceHash = hashBytes(b)
	}
	if t.evidence == nil {
		t.evidence = t.oneEvidence[:0]
	}
	t.evidence = append(t.evidence, e)
	t.run.EvidenceCount++
	t.run.LastStep = e.StepID
	t.touch()
}

// settlementScope is $settlement: completed and failed steps only.
func (t *txn) settlement() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, s := range t.run.CompletedSteps {
		out[s] = t.settlementOf(s, false)
	}
	for _, s := range t.run.FailedSteps {
		out[s] = t.settlementOf(s, true)
	}
	return out
}

func (t *txn) settlementOf(step string, failed bool) map[string]any {
	byDefault := false
	for _, d := range t.run.DefaultedSteps {
		if d == step {
			byDefault = true
		}
	}
	return map[string]any{
		"failed":                failed,
		"settled_by_default":    byDefault,
		"validation_rejections": float64(t.run.ValidationRejections[step]),
	}
}
