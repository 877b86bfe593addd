package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/jsonenc"
)

// The write path: every change to a run is decided on a transaction begun
// from one snapshot (begin), and written by commit as one compare-and-set
// of everything pending. update is the loop around them; read begins a
// transaction that is never committed.
//
// The boundary between what was read and what will be written:
//   - snap.base, and the cached decoded copy begin started from, are
//     read-only: begin clones the run and copies the outputs and trace
//     maps, so no decision reaches them (TestDecidingLeavesTheSnapshotAlone).
//   - snap.run is that clone, and deciding changes it in place: the
//     pending run document is the clone as the decision leaves it, not a
//     diff (rewriting every rule to produce a diff was judged not worth
//     the risk).
//   - pending is the rest of the write: new outputs, trace buffers, the
//     refused-answers list, evidence entries, index ops, the idempotency
//     key. Its setters (setOutput, setBuffered, appendEvidence, touch) also
//     update the snapshot's maps, so later rules in the same decision read
//     what earlier ones wrote.
//   - commit writes exactly that: change turns the clone and pending into
//     one store.Change, and nothing else reaches the store.
//
// A verb decides a typed outcome inside update's closure and composes its
// reply from it after the write, on the run as the write left it.

// maxWriteAttempts bounds how often one act retries after losing a race.
const maxWriteAttempts = 16

// errRunNotFound is returned by update when the run does not exist.
var errRunNotFound = errors.New("run not found")

// errWorkflowMissing wraps a definition that cannot be read.
type errWorkflowMissing struct {
	id string
	// carried: the run's own copy is missing (never written so: a damaged
	// record), not the registered one.
	carried bool
}

func (e *errWorkflowMissing) Error() string {
	if e.carried {
		return fmt.Sprintf("Workflow not found: %s — the definition this run carries (it was started from a file without --register) is missing from its record.", e.id)
	}
	return fmt.Sprintf("Workflow not found: %s", e.id)
}

// update is the single write path. fn reads and changes t; when it marked
// the transaction written, the change is committed with one compare-and-set
// on run_version. On a conflict the run is reloaded and fn runs again.
func (e *Engine) update(ctx context.Context, runID string, fn func(t *txn) error) (*txn, error) {
	fresh, races := false, 0
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		// A decision that writes nothing (a refusal, "nothing to do") has
		// no compare-and-set to catch a cached copy another replica has
		// overtaken, so it is made again on the store's copy.
		snap, cached, err := e.snapshot(ctx, runID, fresh)
		if err != nil {
			return nil, err
		}
		t, err := e.begin(ctx, snap)
		if err != nil {
			return nil, err
		}
		if err := fn(t); err != nil {
			if cached {
				fresh = true
				continue
			}
			return t, err
		}
		if !t.dirty {
			if cached {
				fresh = true
				continue
			}
			return t, nil
		}
		err = e.commit(ctx, t)
		if store.IsConflict(err) {
			// A cached copy another replica overtook is no race: reload at
			// once. Losing to a writer on the store's own copy is: back off.
			if !cached {
				if err := e.conflictPause(ctx, races); err != nil {
					return nil, err
				}
				races++
			}
			fresh = true
			continue
		}
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, errcode.Newf(errcode.StateSnapshotMismatch,
		"Run '%s' kept changing under this call (%d attempts); call get_run_state and try again.", runID, maxWriteAttempts)
}

// conflictPause waits before the next try of an act that lost a race for
// the n-th time: full jitter over an exponential window (1 ms, 2 ms, …,
// at most 512 ms), so writers that collided do not collide again in step.
func (e *Engine) conflictPause(ctx context.Context, n int) error {
	window := time.Millisecond << min(n, 9)
	t := time.NewTimer(rand.N(window) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errcode.Wrap(errcode.StateSnapshotMismatch, ctx.Err(), "the call ended while it waited to write again after losing a race: "+ctx.Err().Error())
	case <-t.C:
		return nil
	}
}

// read loads a run for a reader (never from the cache: a reader must see
// what other replicas wrote).
func (e *Engine) read(ctx context.Context, runID string) (*txn, error) {
	snap, _, err := e.snapshot(ctx, runID, true)
	if err != nil {
		return nil, err
	}
	return e.begin(ctx, snap)
}

// readBatch is how many runs readEach loads in one round trip.
const readBatch = 500

// readEach reads many runs to look at, not to change (run list's page,
// --stuck's candidates): their documents readBatch at a time in one round
// trip each, and fn gets each one that can be read, in order, as a
// transaction that must not be written. One gone or unreadable is
// skipped, as a listing skips it read alone; one carrying its own
// definition (kept with its outputs) is read whole.
func (e *Engine) readEach(ctx context.Context, ids []string, fn func(*txn)) error {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), readBatch)]
		ids = ids[len(batch):]
		docs, err := e.st.LoadDocs(ctx, batch)
		if err != nil {
			return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load runs from store: "+err.Error())
		}
		for i, doc := range docs {
			if doc == nil {
				continue
			}
			r, err := decodeRun(doc.Doc, doc.Version)
			if err != nil {
				continue
			}
			if r.DefinitionSource == record.DefinitionCarried {
				if t, err := e.read(ctx, batch[i]); err == nil {
					fn(t)
				}
				continue
			}
			t := &txn{e: e, snap: snap{prior: r, run: r, now: e.now(), base: &store.Snapshot{Version: doc.Version, Doc: doc.Doc}, wasTerminal: r.Terminal()}}
			if t.def, err = e.definition(ctx, r.WorkflowID); err != nil {
				var missing *errWorkflowMissing
				if !errors.As(err, &missing) {
					continue
				}
				t.def, t.defErr = nil, err
			}
			fn(t)
		}
	}
	return nil
}

// snapshot returns the run, from the cache unless fresh, and whether it
// came from the cache.
func (e *Engine) snapshot(ctx context.Context, runID string, fresh bool) (*decoded, bool, error) {
	if !fresh {
		if d := e.runs.get(runID); d != nil {
			return d, true, nil
		}
	}
	s, err := e.st.LoadRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, errRunNotFound
	}
	if err != nil {
		return nil, false, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	d, err := decode(s)
	if err != nil {
		return nil, false, err
	}
	if worthCaching(d.run) {
		e.runs.put(runID, d)
	}
	return d, false, nil
}

// decoded is a snapshot decoded once: the cache hands out clones of it.
type decoded struct {
	snap    *store.Snapshot
	run     *record.Run
	outputs map[string]any
	traces  map[string][]byte // buffered trace entries by step (raw JSON)
	// attempts is the stored refused-answers list (raw JSON), nil if none.
	attempts []byte
	// definition is the definition the run carries (raw JSON), nil if none.
	definition []byte
	// committed: the run and outputs are a committed transaction's own,
	// not decoded from snap (Options.CheckCache compares the two).
	committed bool
}

func decode(snap *store.Snapshot) (*decoded, error) {
	r, err := decodeRun(snap.Doc, snap.Version)
	if err != nil {
		return nil, err
	}
	outputs := make(map[string]any, len(snap.Outputs))
	traces := map[string][]byte{}
	var attempts, definition []byte
	for step, raw := range snap.Outputs {
		if step == attemptsField {
			attempts = raw
			continue
		}
		if step == definitionField {
			definition = raw
			continue
		}
		if name, ok := strings.CutPrefix(step, traceField); ok {
			traces[name] = raw
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
		}
		outputs[step] = v
	}
	return &decoded{snap: snap, run: r, outputs: outputs, traces: traces, attempts: attempts, definition: definition}, nil
}

// decodeRun is a stored run document at its version.
func decodeRun(doc []byte, version int64) (*record.Run, error) {
	var r record.Run
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	r.Version = version
	r.Normalize()
	return &r, nil
}

// begin starts a transaction on a decoded snapshot. The run is cloned, and
// the outputs and traces maps copied on their first change, so the cached
// copy is never changed; recorded outputs themselves are never changed in
// place.
func (e *Engine) begin(ctx context.Context, d *decoded) (*txn, error) {
	if e.checkCache {
		if err := checkShared(d); err != nil {
			return nil, err
		}
	}
	t := &txn{e: e, snap: snap{prior: d.run, run: d.run.Clone(), outputs: d.outputs, traces: d.traces, now: e.now(), base: d.snap, wasTerminal: d.run.Terminal(), attempts: d.attempts}}
	def, err := e.runDefinition(ctx, d)
	if err != nil {
		var missing *errWorkflowMissing
		if !errors.As(err, &missing) {
			return nil, err
		}
		t.defErr = err
	} else {
		t.def = def
	}
	t.caps = e.readCapabilities(ctx, t.def, t.run)
	return t, nil
}

// commit writes a transaction: the one place a run change reaches the store.
func (e *Engine) commit(ctx context.Context, t *txn) error {
	change, next, cached, err := t.change()
	if err != nil {
		return err
	}
	began := time.Now()
	err = e.st.CommitRun(ctx, change)
	if err != nil {
		if store.IsConflict(err) {
			e.m.write("conflict", time.Since(began))
			e.runs.drop(t.run.ID)
			return err
		}
		e.m.write("error", time.Since(began))
		e.runs.drop(t.run.ID)
		if errors.Is(err, store.ErrOutcomeUnknown) {
			return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to write run to store: "+err.Error()+
				". Call get_run_state to see whether it landed before acting on run '"+t.run.ID+"' again.")
		}
		return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to write run to store: "+err.Error())
	}
	e.m.write("ok", time.Since(began))
	e.m.committed(t)
	e.logCommit(ctx, t, next.Version)
	if !worthCaching(t.run) {
		e.runs.drop(t.run.ID)
		return nil
	}
	// The cache shares the transaction's run and maps rather than copies
	// of them: after its commit a transaction is only read (the reply is
	// built from it), and begin copies before any change.
	*cached = decoded{snap: next, run: t.run, outputs: t.outputs, traces: t.traces, attempts: t.attempts, definition: next.Outputs[definitionField], committed: true}
	e.runs.put(t.run.ID, cached)
	return nil
}

// worthCaching reports whether the run cache should keep r. An ended run
// that owes no finalizer takes no more transitions: it is read now and
// then, packed and purged, each of which can load it. Kept, such runs
// soon fill the cache (most runs end), and every garbage collection walks
// them: a sixth of the CPU of a transition through gRPC went to that
// (docs/benchmarks.md, "2026-12-07 (late afternoon)").
func worthCaching(r *record.Run) bool {
	if !r.Terminal() {
		return true
	}
	_, owes := finalizersDue(r)
	return owes
}

// checkShared is Options.CheckCache: a committed run the cache holds must
// still encode as the document and outputs its commit stored.
func checkShared(d *decoded) error {
	if !d.committed {
		return nil
	}
	doc, err := d.run.AppendJSON(nil)
	if err != nil || !bytes.Equal(doc, d.snap.Doc) {
		return errcode.Newf(errcode.EngineInternal, "run %s changed after its commit (version %d): the cache holds\n%s\nthe store\n%s", d.run.ID, d.snap.Version, doc, d.snap.Doc)
	}
	for step, v := range d.outputs {
		stored, ok := d.snap.Outputs[step]
		if !ok {
			continue
		}
		b, err := jsonenc.MarshalHTML(v)
		if err != nil || !bytes.Equal(b, stored) {
			return errcode.Newf(errcode.EngineInternal, "run %s: output of %s changed after its commit: the cache holds %s, the store %s", d.run.ID, step, b, stored)
		}
	}
	return nil
}

// change turns the transaction into the store's atomic change, the
// snapshot the cache will hold if it commits, and room for the cache's
// entry.
func (t *txn) change() (*store.Change, *store.Snapshot, *decoded, error) {
	r := t.run
	expect := t.base.Version
	if t.create {
		expect = -1
		r.Version = 0
	} else {
		r.Version = t.base.Version + 1
	}
	if !t.keepUpdatedAt {
		r.UpdatedAt = t.stamp()
	}
	if !t.maint {
		t.stampLedger() // a run sealed by this write owes its finalizers
	}
	r.RunPhase = r.Phase()
	if t.index == nil {
		// Not an array in the txn: the change is kept with the cached
		// snapshot (one allocation), and would keep the whole txn alive.
		t.index = make([]store.IndexOp, 0, timerIndexCount+1)
	}
	t.index = t.appendTimerIndexChanges(t.index)
	doc, err := r.AppendJSON(make([]byte, 0, len(t.base.Doc)+256))
	if err != nil {
		return nil, nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode run: "+err.Error())
	}
	// The change, the snapshot, the cache's entry and the first evidence
	// entries' slice are one allocation (the cache keeps the snapshot,
	// so it keeps all of it anyway).
	w := new(struct {
		c    store.Change
		next store.Snapshot
		d    decoded
		ev   [2][]byte
	})
	c, next := &w.c, &w.next
	*c = store.Change{
		RunID:         r.ID,
		ExpectVersion: expect,
		NewVersion:    r.Version,
		Doc:           doc,
		Index:         t.index,
		IdemKey:       t.idemKey,
		IdemExpect:    t.idemExpect,
		Evidence:      w.ev[:0],
	}
	*next = store.Snapshot{
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
		for _, step := range t.newOutputs {
			b, err := t.encodeJSON(t.outputs[step])
			if err != nil {
				return nil, nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode output: "+err.Error())
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
	if t.carriedDef != nil {
		if c.Outputs == nil {
			c.Outputs = map[string][]byte{}
		}
		c.Outputs[definitionField] = t.carriedDef
		next.Outputs[definitionField] = t.carriedDef
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
			return nil, nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode evidence: "+err.Error())
		}
		c.Evidence = append(c.Evidence, b)
	}
	return c, next, &w.d, nil
}

// entry starts an evidence entry stamped with the transaction's time.
func (t *txn) entry(step, status string) *record.Entry {
	ts := t.stamp()
	return &record.Entry{StepID: step, Status: status, StartedAt: ts, CompletedAt: ts}
}

// indexOp adds a run to a bucket index, scored by a time.
func indexOp(index, member string, at time.Time) store.IndexOp {
	return store.IndexOp{Index: index, Member: member, Score: float64(at.UnixMilli())}
}

// appendTimerIndexChanges appends the timer index ops this write must make:
// every add (ZADD of a member already there at its score changes
// nothing, and an add also repairs a run an older engine left out of an
// index), and only the removals from an index the prior record put the
// run in. Every write sets the timer indexes in the same script as the
// record, so they hold what the prior record derives; removing the run
// from the indexes it was never in cost most commits six calls that
// changed nothing. A created run and a maintenance rewrite (gc --heal
// repairs indexes) send every op.
func (t *txn) appendTimerIndexChanges(ops []store.IndexOp) []store.IndexOp {
	start := len(ops)
	ops = appendTimerIndexes(ops, t.run, t.now)
	if t.prior == nil || t.create || t.maint {
		return ops
	}
	had := appendTimerIndexes(make([]store.IndexOp, 0, timerIndexCount), t.prior, t.now)
	out := ops[:start]
	for i, op := range ops[start:] {
		if op.Remove && had[i].Remove {
			continue
		}
		out = append(out, op)
	}
	return out
}

// timerIndexCount is how many ops appendTimerIndexes appends (one per
// timer index): the capacity of the buffers they go into.
const timerIndexCount = 8

// timerIndexes are the bucket indexes that find runs needing attention
// without loading every run (store.IndexClaims and the rest), set from the
// run as a write at now leaves it, in the same atomic script: one op per
// index, appended to dst in a fixed order, so that two runs' ops compare
// index by index. (They are appended one by one into the caller's
// buffer, not returned as an array: a large frame on a gRPC handler's
// goroutine makes its stack grow, which cost more than the allocation.)
func appendTimerIndexes(dst []store.IndexOp, r *record.Run, now time.Time) []store.IndexOp {
	id := r.ID
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
	expiry, hasExpiry, enacts := 0.0, false, false
	if g := r.PendingGate; g != nil && g.ExpiresAt != "" && open {
		expiry, hasExpiry, enacts = float64(record.ParseTime(g.ExpiresAt).UnixMilli()), true, g.OnExpiry != ""
	}
	opened, hasGate := 0.0, false
	if g := r.PendingGate; g != nil && open {
		opened, hasGate = float64(record.ParseTime(g.OpenedAt).UnixMilli()), true
	}
	finDue, owesCleanup := finalizersDue(r)
	dst = append(dst, set(store.IndexClaims, claim, open && hasClaim))
	// Only a gate with something to carry out is the sweeper's: one
	// without on_expiry would sit at the head of its index for ever.
	dst = append(dst, set(store.IndexExpiries, expiry, enacts))
	dst = append(dst, set(store.IndexGateDeadlines, expiry, hasExpiry))
	dst = append(dst, set(store.IndexOpenGates, opened, hasGate))
	dst = append(dst, set(store.IndexActivity, float64(now.UnixMilli()), open))
	dst = append(dst, set(store.IndexFinalizers, float64(finDue.UnixMilli()), !open && owesCleanup))
	dst = append(dst, set(store.IndexBlocked, 0, open && len(r.CapabilityBlocks) > 0))
	// An ended run that owes nothing is only read from here on: the
	// packer stores it compactly once it has rested (SweepPack).
	dst = append(dst, set(store.IndexPack, float64(record.ParseTime(r.UpdatedAt).UnixMilli()), !open && !owesCleanup))
	return dst
}
