package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/realm-go/realm/pkg/condition"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// txn is one decision on one run: what was read, what the act changed, and
// what the reply will say about it. It lives for one attempt of update.
type txn struct {
	e      *Engine
	ctx    context.Context
	base   *store.Snapshot
	run    *record.Run
	def    *compiled
	defErr error
	// outputs are the recorded outputs by step (decoded), including the
	// ones this transaction adds.
	outputs map[string]any
	now     time.Time

	dirty      bool
	newOutputs map[string]any
	traces     map[string][]byte
	newTraces  map[string][]byte
	// attempts is the refused-answers list (attempts.go); written when
	// attemptsDirty.
	attempts      []byte
	attemptsDirty bool
	evidence      []*record.Entry
	index         []store.IndexOp
	idemKey       string
	idemExpect    string
	create        bool
	// wasTerminal is whether the run had ended before this transaction.
	wasTerminal bool
	// maint marks a maintenance rewrite (gc --heal, migrate --stamp-seals):
	// the record's meaning is unchanged, so it never starts a finalizer
	// ledger; keepUpdatedAt also leaves updated_at as it was (a stamped
	// seal is not activity).
	maint, keepUpdatedAt bool

	// What the reply reports about this write.
	chained      []*realmv1.ChainedStep
	hasChained   bool
	guards       []*realmv1.GuardOutcome
	endedBy      *realmv1.EndedBy
	warnings     []string
	lastAuto     string     // the last auto step that completed in this call
	completedArm record.Arm // the arm a completion seals with
	// openedGate is the step whose gate this write opened.
	openedGate string
	// caller is the program behind the act, stamped on claims.
	caller *realmv1.Caller
	// claimToken is the claim execute_step's caller says it holds on the
	// step it answers (ClaimStep).
	claimToken string
	// gateErr is a gate message that could not be rendered.
	gateErr     error
	gateErrStep string
	// expiryLine is the warnings line of an expiry this write carried out.
	expiryLine string
	// expired is the expiry this write carried out, if any.
	expired *expiry
	// traceIn and nonce are execute_step's trace entries and writer_nonce.
	traceIn []*realmv1.TraceEntry
	// usage is what the model requests behind an answer reported.
	usage []*realmv1.ModelUsage
	// strictRecord is the driver's structured_output record of the answer.
	strictRecord map[string]any
	nonce        string
	// adopted counts the trace entries an agent step's record took.
	adopted *[3]int
	// dispatch are the handler steps this write claimed, to run after it.
	dispatch []claimed
	// notes end the hint: outcomes another process kept from the record.
	notes []string
	// failed is a dispatched step that failed; abortedBy a handler abort.
	failed *stepFailure
	// blocked are steps this write found it cannot run (capability).
	blocked   []*workflow.Step
	abortedBy string
	// compose builds the reply once the write has committed.
	// scopeCache is what conditions read, built once per change.
	scopeCache *condition.Scope
	compose    func() *realmv1.Reply
	// encoded memoises the JSON of maps this write stores (encode.go).
	encoded []encodedMap
}

// touch marks the transaction as a write; what conditions read may have
// changed, so the cached scope is dropped.
func (t *txn) touch() {
	t.dirty = true
	t.scopeCache = nil
}

// setOutput records a step's output.
func (t *txn) setOutput(step string, v any) {
	if t.newOutputs == nil {
		t.newOutputs = map[string]any{}
	}
	t.newOutputs[step] = v
	t.outputs[step] = v
	t.touch()
}

// appendEvidence adds an entry to the record.
func (t *txn) appendEvidence(e *record.Entry) {
	if e.EvidenceHash == "" {
		b, _ := t.encodeJSON(e.OutputSummary)
		e.EvidenceHash = hashBytes(b)
	}
	t.evidence = append(t.evidence, e)
	t.run.EvidenceCount++
	t.run.LastStep = e.StepID
	t.touch()
}

// change turns the transaction into the store's atomic change, and the
// snapshot the cache will hold if it commits.
func (t *txn) change() (*store.Change, *store.Snapshot, error) {
	r := t.run
	expect := t.base.Version
	if t.create {
		expect = -1
		r.Version = 0
	} else {
		r.Version = t.base.Version + 1
	}
	if !t.keepUpdatedAt {
		r.UpdatedAt = record.FormatTime(t.now)
	}
	if !t.maint {
		t.stampLedger() // a run sealed by this write owes its finalizers
	}
	r.RunPhase = r.Phase()
	t.index = append(t.index, t.timerIndexes()...)
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode run: "+err.Error())
	}
	c := &store.Change{
		RunID:         r.ID,
		ExpectVersion: expect,
		NewVersion:    r.Version,
		Doc:           doc,
		Index:         t.index,
		IdemKey:       t.idemKey,
		IdemExpect:    t.idemExpect,
	}
	next := &store.Snapshot{
		Version:     r.Version,
		Doc:         doc,
		Outputs:     make(map[string][]byte, len(t.base.Outputs)+len(t.newOutputs)),
		EvidenceLen: t.base.EvidenceLen + int64(len(t.evidence)),
	}
	for k, v := range t.base.Outputs {
		next.Outputs[k] = v
	}
	if len(t.newOutputs) > 0 {
		c.Outputs = make(map[string][]byte, len(t.newOutputs))
		for step, v := range t.newOutputs {
			b, err := t.encodeJSON(v)
			if err != nil {
				return nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode output: "+err.Error())
			}
			c.Outputs[step] = b
			next.Outputs[step] = b
		}
	}
	for step, b := range t.newTraces {
		if c.Outputs == nil {
			c.Outputs = map[string][]byte{}
		}
		c.Outputs[traceField+step] = b // nil deletes the buffer
		if b == nil {
			delete(next.Outputs, traceField+step)
		} else {
			next.Outputs[traceField+step] = b
		}
	}
	if t.attemptsDirty {
		if c.Outputs == nil {
			c.Outputs = map[string][]byte{}
		}
		c.Outputs[attemptsField] = t.attempts
		next.Outputs[attemptsField] = t.attempts
	}
	for _, e := range t.evidence {
		b, err := t.encodeEntry(e)
		if err != nil {
			return nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode evidence: "+err.Error())
		}
		c.Evidence = append(c.Evidence, b)
	}
	return c, next, nil
}

// entry starts an evidence entry stamped with the transaction's time.
func (t *txn) entry(step, status string) *record.Entry {
	ts := record.FormatTime(t.now)
	return &record.Entry{StepID: step, Status: status, StartedAt: ts, CompletedAt: ts}
}

// indexOp adds a run to a bucket index, scored by a time.
func indexOp(index, member string, at time.Time) store.IndexOp {
	return store.IndexOp{Index: index, Member: member, Score: float64(at.UnixMilli())}
}

// indexRemove removes a run from a bucket index.
func indexRemove(index, member string) store.IndexOp {
	return store.IndexOp{Index: index, Member: member, Remove: true}
}

// chain notes a step that finished inside this call.
func (t *txn) chain(step string, warnings ...string) {
	t.hasChained = true
	t.chained = append(t.chained, &realmv1.ChainedStep{Step: step, Warnings: warnings})
}

// fixChainPhases stamps every chained entry with the phase after it. The
// phase only changes at the last entry (a seal or a gate), so entries
// before the last keep "running".
func (t *txn) fixChainPhases() {
	for i, c := range t.chained {
		if i == len(t.chained)-1 && t.run.Terminal() {
			c.RunPhase = phaseEnum(t.run.Phase())
		} else {
			c.RunPhase = realmv1.RunPhase_RUN_PHASE_RUNNING
		}
	}
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

// timerIndexes are the bucket indexes that find runs needing attention
// without loading every run (store.IndexClaims and the rest), set from the
// run as this write leaves it, in the same atomic script.
func (t *txn) timerIndexes() []store.IndexOp {
	r, id := t.run, t.run.ID
	set := func(index string, score float64, on bool) store.IndexOp {
		if !on {
			return store.IndexOp{Index: index, Member: id, Remove: true}
		}
		return store.IndexOp{Index: index, Member: id, Score: score}
	}
	open := !r.Terminal()
	claim, hasClaim := 0.0, false
	for _, s := range r.InProgressSteps {
		if r.PendingGate != nil && s == r.PendingGate.StepName {
			continue // an open question's claim is never stale
		}
		c := r.Claims[s]
		score := 0.0
		if c != nil && c.Deadline != nil {
			score = float64(record.ParseTime(*c.Deadline).UnixMilli())
		}
		if !hasClaim || score < claim {
			claim = score
		}
		hasClaim = true
	}
	expiry, hasExpiry := 0.0, false
	if g := r.PendingGate; g != nil && g.ExpiresAt != "" && open {
		expiry, hasExpiry = float64(record.ParseTime(g.ExpiresAt).UnixMilli()), true
	}
	return []store.IndexOp{
		set(store.IndexClaims, claim, open && hasClaim),
		set(store.IndexExpiries, expiry, hasExpiry),
		set(store.IndexActivity, float64(t.now.UnixMilli()), open),
		set(store.IndexFinalizers, 0, !open && len(pendingFinalizers(r)) > 0),
		set(store.IndexBlocked, 0, open && len(r.CapabilityBlocks) > 0),
	}
}
