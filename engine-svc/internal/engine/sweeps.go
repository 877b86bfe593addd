package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The operator's batch acts (realm run drain --all / --expired, realm run
// purge --older-than) walk a store index a page at a time. Each selected
// run is read, decided and written on its own, by the same compare-and-set
// write the single-run act makes, so a run that moved since the walk read
// it is decided again on what it is now. Nothing but one page of ids and
// the run in hand is held, and each page ends with a progress event.

// MaxPage is the largest page a batch act or gc may be asked for.
const MaxPage = store.MaxWalkPage

// Item outcomes (OperatorItem.outcome).
const (
	outcomeWould   = "would"
	outcomeDone    = "done"
	outcomeGone    = "gone"
	outcomeBlocked = "blocked"
	outcomeFailed  = "failed"
	outcomeWarned  = "warned"
)

// Emit sends one event of a batch act's stream.
type Emit func(*realmv1.OperatorEvent) error

// batchWalk counts a batch act's walk and streams its events.
type batchWalk struct {
	emit Emit
	sum  realmv1.OperatorSummary
}

// item streams one selected run and counts its outcome.
func (w *batchWalk) item(it *realmv1.OperatorItem) error {
	s := &w.sum
	switch it.GetOutcome() {
	case outcomeWarned:
		s.Warned++
	default:
		s.Selected++
	}
	switch it.GetOutcome() {
	case outcomeDone:
		s.Done++
	case outcomeGone:
		s.Gone++
	case outcomeBlocked:
		s.Blocked++
	case outcomeFailed:
		s.Failed++
	}
	// What would be or was removed: resumable runs and bytes.
	if it.GetOutcome() == outcomeWould || it.GetOutcome() == outcomeDone {
		s.SizeBytes += it.GetSizeBytes()
		if it.GetResumable() {
			s.Resumable++
		}
	}
	return w.emit(&realmv1.OperatorEvent{Event: &realmv1.OperatorEvent_Item{Item: it}})
}

// page counts a page of n runs read and streams the progress so far.
func (w *batchWalk) page(n int) error {
	s := &w.sum
	s.Pages++
	s.Scanned += int64(n)
	s.LargestPage = max(s.LargestPage, int32(n))
	return w.emit(&realmv1.OperatorEvent{Event: &realmv1.OperatorEvent_Progress{Progress: &realmv1.OperatorProgress{
		Scanned: s.Scanned, Batch: int32(n), Selected: s.Selected, Done: s.Done,
	}}})
}

// finish streams the summary, the last event.
func (w *batchWalk) finish() error {
	sum := &w.sum
	return w.emit(&realmv1.OperatorEvent{Event: &realmv1.OperatorEvent_Summary{Summary: sum}})
}

// walkRuns walks index up to upTo a page at a time, deciding each run with
// one; a run one decides nothing about (nil item) is not selected. The run
// cache is not filled by the walk: a batch reads each run once.
func (e *Engine) walkRuns(ctx context.Context, w *batchWalk, index string, upTo float64, pageSize int, one func(context.Context, string) (*realmv1.OperatorItem, error)) error {
	m, err := e.maintenance()
	if err != nil {
		return err
	}
	err = m.WalkIndex(ctx, index, upTo, store.WalkPage(pageSize, store.DefaultWalkPage), func(page []store.IndexEntry) error {
		for _, en := range page {
			it, err := one(ctx, en.Member)
			e.runs.drop(en.Member)
			if err != nil {
				return err
			}
			if it == nil {
				continue
			}
			if err := w.item(it); err != nil {
				return err
			}
		}
		return w.page(len(page))
	})
	if err != nil && ctx.Err() == nil && !isStreamErr(err) {
		return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to walk the store: "+err.Error())
	}
	return err
}

// streamErr marks an error of the caller's stream, passed through as is.
type streamErr struct{ err error }

func (s streamErr) Error() string { return s.err.Error() }
func (s streamErr) Unwrap() error { return s.err }

func isStreamErr(err error) bool {
	var s streamErr
	return errors.As(err, &s)
}

// streaming wraps emit so its failures pass through the walk unchanged.
func streaming(emit Emit) Emit {
	return func(ev *realmv1.OperatorEvent) error {
		if err := emit(ev); err != nil {
			return streamErr{err}
		}
		return nil
	}
}

// PurgeRuns deletes every ended run whose last write is at least
// older_than_seconds ago (of workflow_id, when set); without force it says
// what it would delete (cli spec §4.8). The walk is the run index up to
// the cutoff: a run is indexed by its creation, and a run created after
// the cutoff cannot have been last written before it.
func (e *Engine) PurgeRuns(ctx context.Context, req *realmv1.PurgeRunsRequest, emit Emit) error {
	w := &batchWalk{emit: streaming(emit)}
	cutoff := e.now().Add(-time.Duration(req.GetOlderThanSeconds()) * time.Second)
	one := func(ctx context.Context, id string) (*realmv1.OperatorItem, error) {
		return e.purgeSelected(ctx, id, cutoff, req.GetWorkflowId(), req.GetForce())
	}
	if err := e.walkRuns(ctx, w, store.IndexRuns, float64(cutoff.UnixMilli()), int(req.GetPageSize()), one); err != nil {
		return err
	}
	return w.finish()
}

// purgeSelected decides one run of a batch purge and, with force, deletes
// it at the version it was decided on (decided again if it moved).
func (e *Engine) purgeSelected(ctx context.Context, id string, cutoff time.Time, workflowID string, force bool) (*realmv1.OperatorItem, error) {
	for attempt := 0; ; attempt++ {
		t, err := e.read(ctx, id)
		if errors.Is(err, errRunNotFound) {
			return nil, nil // an index entry whose run is gone: gc's residue
		}
		if err != nil {
			return &realmv1.OperatorItem{RunId: id, Outcome: outcomeFailed, Line: oneLineErr(err)}, nil
		}
		r := t.run
		if !r.Terminal() || (workflowID != "" && r.WorkflowID != workflowID) || record.ParseTime(r.UpdatedAt).After(cutoff) {
			return nil, nil
		}
		it := &realmv1.OperatorItem{RunId: id, RunPhase: phaseEnum(r.Phase()), SizeBytes: storedSize(t.base), Resumable: resumable(r)}
		if line, outcome, held := purgeHold(t); held {
			it.Outcome, it.Line = outcome, line
			return it, nil
		}
		if !force {
			it.Outcome = outcomeWould
			return it, nil
		}
		err = e.st.DeleteRun(ctx, id, keyOf(r.WorkflowID, r.IdempotencyKey), t.base.Version)
		switch {
		case store.IsConflict(err) && attempt+1 < maxWriteAttempts:
			if err := e.conflictPause(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		case store.IsConflict(err):
			it.Outcome, it.Line = outcomeFailed, fmt.Sprintf("kept changing under this call (%d attempts)", maxWriteAttempts)
		case errors.Is(err, store.ErrNotFound):
			it.Outcome = outcomeGone
		case err != nil:
			it.Outcome, it.Line = outcomeFailed, err.Error()
		default:
			it.Outcome = outcomeDone
		}
		return it, nil
	}
}

// purgeHold says why a batch purge leaves a selected ended run: a healthy
// claim (never purged), a claim of unknown age (purgeable only when named),
// or a finalizer still owed.
func purgeHold(t *txn) (line, outcome string, held bool) {
	r := t.run
	for step, c := range r.Claims {
		if c.Deadline != nil && t.now.Before(record.ParseTime(*c.Deadline)) {
			return fmt.Sprintf("healthy_claim ('%s', deadline %s) — never purged", step, *c.Deadline), outcomeBlocked, true
		}
	}
	for step, c := range r.Claims {
		if c.Deadline == nil {
			return fmt.Sprintf("step '%s' has a claim of unknown age — skipped in batch mode; to purge it, name it: realm run purge %s", step, r.ID), outcomeWarned, true
		}
	}
	if len(pendingFinalizers(r)) > 0 {
		return "drain_pending", outcomeBlocked, true
	}
	return "", "", false
}

// resumable: realm run resume could reopen the run (cli spec §4.8).
func resumable(r *record.Run) bool {
	p := r.Phase()
	return (p == record.PhaseFailed || p == record.PhaseAbandoned) && len(r.FailedSteps) > 0
}

// storedSize is what the store holds of a run's document and outputs.
func storedSize(s *store.Snapshot) int64 {
	if s == nil {
		return 0
	}
	n := int64(len(s.Doc))
	for k, v := range s.Outputs {
		n += int64(len(k) + len(v))
	}
	return n
}

func oneLineErr(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// DrainRuns delivers the finalizers every ended run still owes (the
// finalizers index) and, with expired, first carries out every open gate
// whose time is up and that declares on_expiry (the gate deadlines index);
// an abort it enacts ends the run, whose finalizers the second walk then
// drains. Without force it says what it would do (cli spec §4.7).
func (e *Engine) DrainRuns(ctx context.Context, req *realmv1.DrainRunsRequest, emit Emit) error {
	w := &batchWalk{emit: streaming(emit)}
	page := int(req.GetPageSize())
	if req.GetExpired() {
		now := e.now()
		one := func(ctx context.Context, id string) (*realmv1.OperatorItem, error) {
			return e.expireSelected(ctx, id, req.GetForce())
		}
		if err := e.walkRuns(ctx, w, store.IndexGateDeadlines, float64(now.UnixMilli()), page, one); err != nil {
			return err
		}
	}
	one := func(ctx context.Context, id string) (*realmv1.OperatorItem, error) {
		return e.drainSelected(ctx, id, req.GetForce(), req.GetCaller())
	}
	if err := e.walkRuns(ctx, w, store.IndexFinalizers, math.Inf(1), page, one); err != nil {
		return err
	}
	return w.finish()
}

// drainSelected decides one ended run of a batch drain: selected when a
// pending finalizer is not leased by a drainer at work; with force,
// drained by the single-run drain.
func (e *Engine) drainSelected(ctx context.Context, id string, force bool, caller *realmv1.Caller) (*realmv1.OperatorItem, error) {
	t, err := e.read(ctx, id)
	if errors.Is(err, errRunNotFound) {
		return nil, nil
	}
	if err != nil {
		return &realmv1.OperatorItem{RunId: id, Outcome: outcomeFailed, Line: oneLineErr(err)}, nil
	}
	if !t.run.Terminal() || !actionable(t) {
		return nil, nil
	}
	it := &realmv1.OperatorItem{RunId: id, RunPhase: phaseEnum(t.run.Phase()), Outcome: outcomeWould}
	if !force {
		return it, nil
	}
	resp, err := e.DrainRun(ctx, &realmv1.DrainRunRequest{RunId: id, Force: true, Caller: caller})
	if err != nil {
		it.Outcome, it.Line = outcomeFailed, oneLineErr(err)
		return it, nil
	}
	r := resp.GetReply()
	switch r.GetStatus() {
	case realmv1.ReplyStatus_REPLY_STATUS_OK:
		it.Outcome, it.Line = outcomeDone, "drained"
	default:
		why := r.GetContextHint()
		if len(r.GetErrors()) > 0 {
			why = strings.Join(r.GetErrors(), " ")
		}
		it.Outcome, it.Line = outcomeFailed, strings.ReplaceAll(why, "\n", " ")
	}
	return it, nil
}

// actionable: a pending finalizer no drainer's live lease holds.
func actionable(t *txn) bool {
	for _, n := range pendingFinalizers(t.run) {
		if _, held := leaseHeld(t.run.FinalizerLedger[n], t.now); !held {
			return true
		}
	}
	return false
}

// expireSelected decides one open gate past its time for drain --expired:
// a gate declaring on_expiry is carried out (with force) as the sweeper
// would; one without is listed as a finding and never enacted.
func (e *Engine) expireSelected(ctx context.Context, id string, force bool) (*realmv1.OperatorItem, error) {
	t, err := e.read(ctx, id)
	if errors.Is(err, errRunNotFound) {
		return nil, nil
	}
	if err != nil {
		return &realmv1.OperatorItem{RunId: id, Outcome: outcomeFailed, Line: oneLineErr(err)}, nil
	}
	g := t.run.PendingGate
	if g == nil || t.run.Terminal() || g.ExpiresAt == "" {
		return nil, nil
	}
	at := record.ParseTime(g.ExpiresAt)
	if at.IsZero() || t.now.Before(at) {
		return nil, nil
	}
	it := &realmv1.OperatorItem{RunId: id, RunPhase: phaseEnum(t.run.Phase())}
	ago := lag(t.now.Sub(at))
	if g.OnExpiry == "" {
		it.Outcome = outcomeWarned
		it.Line = fmt.Sprintf("gate '%s' expired %s ago — expired — finding-only (it declares no on_expiry; answer it: realm run respond %s --gate %s)", g.GateID, ago, id, g.GateID)
		return it, nil
	}
	disposition := dispositionOf(g)
	if !force {
		it.Outcome, it.Line = outcomeWould, fmt.Sprintf("gate expired %s ago — would enact %s", ago, disposition)
		if g := expiryOutlook(t); g != "" {
			it.Line += "; " + g
		}
		return it, nil
	}
	var did *expiry
	t, err = e.update(ctx, id, func(t *txn) error {
		if t.def == nil {
			return nil
		}
		did = t.enactExpiry("drain")
		return nil
	})
	switch {
	case errors.Is(err, errRunNotFound):
		it.Outcome = outcomeGone
	case err != nil:
		it.Outcome, it.Line = outcomeFailed, oneLineErr(err)
	case did == nil:
		it.Outcome, it.Line = outcomeBlocked, "nothing due any more (answered or carried out meanwhile)"
	default:
		it.Outcome, it.Line = outcomeDone, fmt.Sprintf("gate enacted (%s) — run now '%s'", disposition, t.run.Phase())
		it.RunPhase = phaseEnum(t.run.Phase())
	}
	return it, nil
}

// dispositionOf names what an expired gate's on_expiry does.
func dispositionOf(g *record.PendingGate) string {
	if g.OnExpiry == "settle_default" {
		return fmt.Sprintf("settle_default '%s'", g.DefaultChoice)
	}
	return g.OnExpiry
}

// expiryOutlook is what carrying out the run's expired gate would do to
// its guards, said before --force does it: the expiry is carried out on
// this read's copy of the run, which is never written. "" when the
// workflow cannot be read or no guard is decided.
func expiryOutlook(t *txn) string {
	if t.def == nil || t.enactExpiry("drain") == nil {
		return ""
	}
	reason := func() string {
		r := t.run.TerminalReason
		if r == "" && t.run.AbortedAt != nil {
			r = t.run.AbortedAt.AbortMessage
		}
		if t.endedBy != nil && t.endedBy.reason != nil {
			r = *t.endedBy.reason
		}
		return strings.TrimSuffix(r, ".")
	}
	var parts []string
	for _, g := range t.guards {
		switch {
		case g.outcome == "pass" && t.endedBy != nil && t.endedBy.step == g.step && t.run.Phase() == record.PhaseCompleted:
			parts = append(parts, fmt.Sprintf("guard '%s' would pass and complete the run", g.step))
		case g.outcome == "pass":
			parts = append(parts, fmt.Sprintf("guard '%s' would pass", g.step))
		case g.outcome == "abort":
			parts = append(parts, fmt.Sprintf("guard '%s' would then abort the run (%s)", g.step, reason()))
		default:
			parts = append(parts, fmt.Sprintf("guard '%s' would then fail the run (%s)", g.step, reason()))
		}
	}
	return strings.Join(parts, "; ")
}
