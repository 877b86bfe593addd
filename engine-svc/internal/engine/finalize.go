package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// finalizerLease is how long a drainer's lease on a finalizer runs between
// renewals (clamped to at most 300 s by the spec; a finalizer's own timeout
// extends it up to that). The drainer renews it every third of a lease
// while the handler runs, so a finalizer may run as long as its timeout
// (up to 3,600 s) without a second drainer taking it over.
const (
	finalizerLease    = 30 * time.Second
	maxFinalizerLease = 300 * time.Second
	// finalizerGrace is how long the process that sealed a run has to
	// take its first finalizer's lease before the sweeper drains it.
	finalizerGrace = 10 * time.Second
)

// finalizersDue is when an ended run's owed cleanup becomes the sweeper's
// (store.IndexFinalizers): while a drainer holds a lease, when the last
// held lease runs out; otherwise a grace after the run's last write, so
// the process that sealed it drains it first.
func finalizersDue(r *record.Run) (time.Time, bool) {
	pending := pendingFinalizers(r)
	if len(pending) == 0 {
		return time.Time{}, false
	}
	var held time.Time
	for _, n := range pending {
		if f := r.FinalizerLedger[n]; f.LeaseToken != "" {
			if until := record.ParseTime(f.LeaseDeadline); until.After(held) {
				held = until
			}
		}
	}
	if !held.IsZero() {
		return held, true
	}
	return record.ParseTime(r.UpdatedAt).Add(finalizerGrace), true
}

// SweepFinalizers drains the ended runs whose owed cleanup no process is
// delivering: its drainer died (its lease ran out) or the process that
// sealed the run died before it took one. Each drain runs in the
// background, owned by ctx and waited for by WaitDrives; the lease keeps a
// second sweep (here or on another replica) from running a finalizer
// twice at once. It returns how many runs it started draining.
func (e *Engine) SweepFinalizers(ctx context.Context, limit int) (int, error) {
	due, err := e.st.Due(ctx, store.IndexFinalizers, float64(e.now().UnixMilli()), limit)
	if err != nil {
		return 0, err
	}
	for _, runID := range due {
		e.drives.Add(1)
		go func() {
			defer e.drives.Done()
			res, err := e.drainFinalizers(ctx, runID, sweeperCaller)
			if err != nil && !errors.Is(err, errRunNotFound) && ctx.Err() == nil {
				e.log.Warn("sweep: draining an ended run's finalizers failed", "run_id", runID, "err", err)
				return
			}
			for _, r := range res {
				if r.status != "lease_held" && r.status != "pending" {
					e.log.Info("sweep: delivered a finalizer no process was delivering", "run_id", runID, "finalizer", r.name, "status", r.status)
				}
			}
		}()
	}
	return len(due), nil
}

// Ledger statuses.
const (
	ledgerPending   = "pending"
	ledgerCompleted = "completed"
	ledgerFailed    = "failed"
	ledgerVoided    = "voided"
)

// stampLedger chooses the finalizers a run owes when it is sealed, by
// on_outcome (spec §6.8). Abandoned runs owe none: abandon is a kill.
func (t *txn) stampLedger() {
	r := t.run
	if t.def == nil || r.FinalizerLedger != nil || !r.Terminal() {
		return
	}
	phase := r.Phase()
	if phase == record.PhaseAbandoned {
		return
	}
	failedNonFinal := false
	for _, s := range r.FailedSteps {
		if st := t.stepOf(s); st != nil && st.Execution != workflow.KindFinalizer {
			failedNonFinal = true
		}
	}
	rank := 0
	for _, s := range t.def.ordered {
		if s.Execution != workflow.KindFinalizer || !matchesOutcome(s.OnOutcome, phase, failedNonFinal) {
			continue
		}
		if r.FinalizerLedger == nil {
			r.FinalizerLedger = map[string]*record.FinalizerStatus{}
		}
		rank++
		r.FinalizerLedger[s.Name] = &record.FinalizerStatus{Status: ledgerPending, Rank: rank}
	}
}

func matchesOutcome(outcomes []string, phase string, failedSteps bool) bool {
	for _, o := range outcomes {
		switch {
		case o == "always" && phase != record.PhaseAbandoned,
			o == "complete" && phase == record.PhaseCompleted,
			o == "fail" && phase == record.PhaseFailed,
			o == "abort" && phase == record.PhaseAborted,
			o == "completed_with_failed_steps" && phase == record.PhaseCompleted && failedSteps:
			return true
		}
	}
	return false
}

// pendingFinalizers are the ledger's pending entries in rank order.
func pendingFinalizers(r *record.Run) []string {
	var out []string
	for name, f := range r.FinalizerLedger {
		if f.Status == ledgerPending {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return r.FinalizerLedger[a].Rank - r.FinalizerLedger[b].Rank })
	return out
}

// leaseHeld reports whether another drainer's lease on a finalizer has not
// passed, and until when.
func leaseHeld(f *record.FinalizerStatus, now time.Time) (time.Time, bool) {
	if f.LeaseToken == "" {
		return time.Time{}, false
	}
	until := record.ParseTime(f.LeaseDeadline)
	return until, now.Before(until)
}

// drainResult says what draining did to one finalizer.
type drainResult struct {
	name, status, detail string
}

// drainFinalizers runs a terminal run's pending finalizers in rank order,
// each under a lease taken in its own compare-and-set write, so two drainers
// never run one cleanup: the second finds the lease held and leaves it.
//
// A call no runner took to its end (none reachable, or it died with the
// call) is not the finalizer's failure: the finalizer stays pending, its
// lease given back, and this drain leaves it; the sweeper delivers it
// again after finalizerGrace (at least once, as with a dead drainer).
func (e *Engine) drainFinalizers(ctx context.Context, runID string, caller *realmv1.Caller) ([]drainResult, error) {
	var results []drainResult
	undelivered := map[string]bool{}
	for {
		var name, token string
		var s *workflow.Step
		var c claimed
		var held []drainResult
		var lease time.Duration
		t, err := e.update(ctx, runID, func(t *txn) error {
			name, token, s, held = "", "", nil, nil
			if t.def == nil || !t.run.Terminal() {
				return nil
			}
			for _, n := range pendingFinalizers(t.run) {
				f := t.run.FinalizerLedger[n]
				if until, ok := leaseHeld(f, t.now); ok {
					held = append(held, drainResult{name: n, status: "lease_held", detail: record.FormatTime(until)})
					continue
				}
				if undelivered[n] {
					held = append(held, drainResult{name: n, status: ledgerPending, detail: undeliveredDetail})
					continue
				}
				st := t.stepOf(n)
				if st == nil || !t.capable(st.Handler) {
					held = append(held, drainResult{name: n, status: "pending", detail: "handler not available here"})
					continue
				}
				lease = finalizerLease
				if st.TimeoutSeconds > 0 {
					lease = min(max(lease, time.Duration(st.TimeoutSeconds)*time.Second+5*time.Second), maxFinalizerLease)
				}
				nf := *f
				nf.LeaseToken, nf.LeaseDeadline = uuid.NewString(), record.FormatTime(t.now.Add(lease))
				t.run.FinalizerLedger[n] = &nf
				t.touch()
				name, token, s = n, nf.LeaseToken, st
				c = claimed{step: n, token: nf.LeaseToken, input: map[string]any{}, resources: t.resources()}
				return nil
			}
			return nil
		})
		if err != nil {
			return results, err
		}
		if name == "" {
			return append(results, held...), nil
		}
		// The lease is renewed while the handler runs, however long it
		// takes; if it is lost (taken over), the handler's call is cut.
		stepCtx, cut := context.WithCancel(ctx)
		renewing := make(chan struct{})
		go func() {
			defer close(renewing)
			e.renewFinalizerLease(stepCtx, runID, name, token, lease, cut)
		}()
		out := e.runStep(stepCtx, runID, t.run, s, c)
		cut()
		<-renewing
		if a := out.last(); len(out.attempts) > 0 && (a.unreached || a.stale) {
			undelivered[name] = true
			if err := e.giveBackLease(ctx, runID, name, token); err != nil {
				return results, err
			}
			e.log.Warn("a finalizer's call reached no runner; it stays pending for the sweeper", "run_id", runID, "finalizer", name, "err", a.err)
			continue
		}
		var res drainResult
		_, err = e.update(ctx, runID, func(t2 *txn) error {
			f := t2.run.FinalizerLedger[name]
			if f == nil || f.LeaseToken != token || f.Status != ledgerPending {
				res = drainResult{name: name, status: "superseded"}
				return nil // another drainer took it over after our lease passed
			}
			res = t2.recordFinalizer(s, out, caller)
			return nil
		})
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
}

// undeliveredDetail is why a finalizer whose call reached no runner is
// still pending.
const undeliveredDetail = "its call reached no runner that finished it; the sweeper delivers it again"

// giveBackLease ends this drainer's lease on a pending finalizer, if it
// still holds it, so another drain (the sweeper's) may run it. The write
// moves the run's updated_at: the sweeper's grace counts from it.
func (e *Engine) giveBackLease(ctx context.Context, runID, name, token string) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := e.update(wctx, runID, func(t *txn) error {
		f := t.run.FinalizerLedger[name]
		if f == nil || f.LeaseToken != token || f.Status != ledgerPending {
			return nil
		}
		nf := *f
		nf.LeaseToken, nf.LeaseDeadline = "", ""
		t.run.FinalizerLedger[name] = &nf
		t.touch()
		return nil
	})
	return err
}

// renewFinalizerLease pushes a finalizer's lease deadline a lease ahead
// every third of a lease until ctx ends. When the ledger no longer holds
// token (another drainer took the finalizer over, the run was purged) it
// calls lost and stops. A renewal that cannot be written is tried again
// at the next tick; the lease is long enough to miss two.
func (e *Engine) renewFinalizerLease(ctx context.Context, runID, name, token string, lease time.Duration, lost func()) {
	every := lease / 3
	if e.leaseRenewEvery > 0 {
		every = e.leaseRenewEvery
	}
	ticking(ctx, every, func() bool {
		gone := false
		_, err := e.update(ctx, runID, func(t *txn) error {
			f := t.run.FinalizerLedger[name]
			if f == nil || f.LeaseToken != token || f.Status != ledgerPending {
				gone = true
				return nil
			}
			nf := *f
			nf.LeaseDeadline = record.FormatTime(t.now.Add(lease))
			t.run.FinalizerLedger[name] = &nf
			t.maint, t.keepUpdatedAt = true, true
			t.touch()
			return nil
		})
		switch {
		case errors.Is(err, errRunNotFound), err == nil && gone:
			e.log.Warn("finalizer lease lost while it ran; its call is cut", "run_id", runID, "finalizer", name)
			lost()
			return false
		case err != nil && ctx.Err() == nil:
			e.log.Warn("could not renew a finalizer's lease", "run_id", runID, "finalizer", name, "err", err)
		}
		return true
	})
}

// recordFinalizer records a finalizer's outcome on the ledger and in the
// evidence. A finalizer never changes how the run ended; its own abort
// counts as its failure.
func (t *txn) recordFinalizer(s *workflow.Step, o outcome, caller *realmv1.Caller) drainResult {
	a := o.last()
	e := &record.Entry{StepID: s.Name, Status: "success", StartedAt: record.FormatTime(a.started), CompletedAt: record.FormatTime(a.finished),
		DurationMS: a.finished.Sub(a.started).Milliseconds(), InputSummary: map[string]any{}, DrivenBy: holderOf(caller)}
	f := *t.run.FinalizerLedger[s.Name]
	f.LeaseToken, f.LeaseDeadline = "", ""
	res := drainResult{name: s.Name}
	switch {
	case a.err != "":
		e.Status, e.Error, e.OutputSummary = "error", a.err, map[string]any{}
		f.Status, res.status, res.detail = ledgerFailed, ledgerFailed, a.err
		t.run.FailedSteps = appendUnique(t.run.FailedSteps, s.Name)
	case a.resp.AbortMessage != nil:
		msg := fmt.Sprintf("Finalizer '%s' aborted: %s", s.Name, a.resp.GetAbortMessage())
		e.Status, e.Error, e.OutputSummary = "error", msg, map[string]any{"aborted": true, "abort_message": a.resp.GetAbortMessage()}
		f.Status, res.status, res.detail = ledgerFailed, ledgerFailed, msg
		t.run.FailedSteps = appendUnique(t.run.FailedSteps, s.Name)
	default:
		e.OutputSummary = dataOf(a.resp)
		e.Warn = a.resp.GetWarn()
		f.Status, res.status = ledgerCompleted, ledgerCompleted
		t.run.CompletedSteps = appendUnique(t.run.CompletedSteps, s.Name)
		t.setOutput(s.Name, e.OutputSummary)
	}
	t.run.FinalizerLedger[s.Name] = &f
	t.appendEvidence(e)
	return res
}

func appendUnique(xs []string, x string) []string {
	if slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

// cleanupTail names the cleanup steps a run's ending left pending (seed: a
// run that has ended), before the resume command.
func (t *txn) cleanupTail() string {
	var parts []string
	for _, n := range pendingFinalizers(t.run) {
		f := t.run.FinalizerLedger[n]
		if until, ok := leaseHeld(f, t.now); ok {
			at := record.FormatTime(until)
			parts = append(parts, fmt.Sprintf("Cleanup step left pending: '%s' — held by another drainer's lease until %s (realm cannot tell whether it is still running) — after %s, 'realm run drain %s --force' runs it with code that has its handler.", n, at, at, t.run.ID))
			continue
		}
		parts = append(parts, fmt.Sprintf("Cleanup step left pending: '%s' — 'realm run drain %s --force' runs it with code that has its handler.", n, t.run.ID))
	}
	return strings.Join(parts, " ")
}

// DrainRun runs the finalizers a terminal run still owes; without force it
// says what it would do. With expired it first carries out an open gate
// whose time is up and that declares on_expiry; with void it marks one
// pending finalizer voided instead of running it (cli spec §4.7).
func (e *Engine) DrainRun(ctx context.Context, req *realmv1.DrainRunRequest) (*realmv1.DrainRunResponse, error) {
	const command = "drain"
	if req.GetVoid() != "" {
		return e.voidFinalizer(ctx, req)
	}
	t, err := e.read(ctx, req.GetRunId())
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.DrainRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	var before []string
	if !t.run.Terminal() && req.GetExpired() {
		var done bool
		var r *realmv1.Reply
		if t, before, r, done, err = e.drainExpired(ctx, req, t); err != nil || done {
			return &realmv1.DrainRunResponse{Reply: r}, err
		}
	}
	r := t.envelope(command)
	if !t.run.Terminal() {
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_BLOCKED
		r.ContextHint = notTerminalHint(t)
		if len(before) > 0 {
			// The enactment left the run open: a report, not a refusal.
			r.Status = realmv1.ReplyStatus_REPLY_STATUS_OK
			r.ContextHint = strings.Join(append(before, fmt.Sprintf("Run '%s' is not terminal (phase: '%s') — nothing further to drain.", t.run.ID, t.run.Phase())), "\n")
		}
		return &realmv1.DrainRunResponse{Reply: r}, nil
	}
	resp, err := e.drainEnded(ctx, req, t)
	if err == nil && len(before) > 0 {
		resp.Reply.ContextHint = strings.Join(append(before, resp.Reply.GetContextHint()), "\n")
	}
	return resp, err
}

// notTerminalHint is drain's line for an open run: with the expiry's way
// when its gate's time is up.
func notTerminalHint(t *txn) string {
	r := t.run
	if g := r.PendingGate; g != nil && g.ExpiresAt != "" {
		if at := record.ParseTime(g.ExpiresAt); !at.IsZero() && !t.now.Before(at) {
			return fmt.Sprintf("Run '%s' is not terminal (phase: '%s') — nothing to drain. Its gate expired %s ago. To see what the expiry will do: realm run drain %s --expired; add --force to carry it out.", r.ID, r.Phase(), lag(t.now.Sub(at)), r.ID)
		}
	}
	return fmt.Sprintf("Run '%s' is not terminal (phase: '%s') — nothing to drain. To end the run: realm run abandon %s.", r.ID, r.Phase(), r.ID)
}

// drainExpired is drain --expired on an open run: it says what the gate's
// expiry would do or (force) carries it out. done reports that the reply
// is whole; otherwise the drain goes on with the run as the enactment left
// it, after the lines before.
func (e *Engine) drainExpired(ctx context.Context, req *realmv1.DrainRunRequest, t *txn) (*txn, []string, *realmv1.Reply, bool, error) {
	g := t.run.PendingGate
	if g == nil || g.ExpiresAt == "" {
		return t, nil, nil, false, nil
	}
	at := record.ParseTime(g.ExpiresAt)
	if at.IsZero() || t.now.Before(at) {
		return t, nil, nil, false, nil
	}
	r := t.envelope("drain")
	ago := lag(t.now.Sub(at))
	if g.OnExpiry == "" {
		r.ContextHint = fmt.Sprintf("Run '%s': gate '%s' expired %s ago — expired — finding-only: it declares no on_expiry, so drain never enacts it. Answer it: realm run respond %s --gate %s, or end the run: realm run abandon %s.", t.run.ID, g.GateID, ago, t.run.ID, g.GateID, t.run.ID)
		return t, nil, r, true, nil
	}
	disposition := dispositionOf(g)
	if !req.GetForce() {
		would := disposition
		if g := expiryOutlook(t); g != "" {
			would += "; " + g
		}
		r.ContextHint = fmt.Sprintf("Run '%s': gate expired %s ago — would enact %s on --force.", r.GetRunId(), ago, would)
		return t, nil, r, true, nil
	}
	var did *expiry
	nt, err := e.update(ctx, t.run.ID, func(t *txn) error {
		if t.def != nil {
			did = t.enactExpiry("drain")
		}
		return nil
	})
	if err != nil {
		return t, nil, nil, true, err
	}
	if did == nil {
		// Answered or carried out since it was read: drain what is there.
		return nt, nil, nil, false, nil
	}
	return nt, []string{fmt.Sprintf("✓ gate enacted (%s).", disposition)}, nil, false, nil
}

// drainEnded is drain on an ended run.
func (e *Engine) drainEnded(ctx context.Context, req *realmv1.DrainRunRequest, t *txn) (*realmv1.DrainRunResponse, error) {
	const command = "drain"
	r := t.envelope(command)
	pending := pendingFinalizers(t.run)
	if len(pending) == 0 {
		r.ContextHint = fmt.Sprintf("Run '%s' has no pending finalizers. Nothing to drain.", t.run.ID)
		return &realmv1.DrainRunResponse{Reply: r}, nil
	}
	if !req.GetForce() {
		lines := []string{fmt.Sprintf("Run '%s' (%s) — pending finalizers, rank order:", t.run.ID, t.run.Phase())}
		for _, n := range pending {
			f := t.run.FinalizerLedger[n]
			if until, ok := leaseHeld(f, t.now); ok {
				lines = append(lines, fmt.Sprintf("  • [%d] %s: lease held (expires %s) — a drainer is executing NOW", f.Rank, n, record.FormatTime(until)))
				continue
			}
			lines = append(lines, fmt.Sprintf("  • [%d] %s: actionable — would lease and run on --force, if its handler resolves on this surface", f.Rank, n))
		}
		lines = append(lines, "", "Re-run with --force to actually drain. Use --void <finalizer> to void one instead.")
		r.ContextHint = strings.Join(lines, "\n")
		return &realmv1.DrainRunResponse{Reply: r}, nil
	}
	results, err := e.drainFinalizers(ctx, req.GetRunId(), req.GetCaller())
	if err != nil {
		return nil, err
	}
	t, err = e.read(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	r = t.envelope(command)
	var lines []string
	for _, res := range results {
		switch res.status {
		case ledgerCompleted, ledgerFailed:
			lines = append(lines, fmt.Sprintf("finalizer '%s': %s", res.name, res.status))
		case "lease_held":
			lines = append(lines, fmt.Sprintf("Finalizer '%s' has an active drain lease (expires %s) — a drainer is executing NOW. Wait for the lease to expire (bounded — leases are clamped to 300s) and retry. Not force-bypassable.", res.name, res.detail))
		default:
			lines = append(lines, fmt.Sprintf("finalizer '%s': still pending (%s)", res.name, res.detail))
		}
	}
	if left := pendingFinalizers(t.run); len(left) > 0 {
		r.Status = realmv1.ReplyStatus_REPLY_STATUS_ERROR
		r.ErrorCode = string(errcode.EngineHandlerNotRegistered)
		r.Errors = []string{t.cleanupTail()}
	} else {
		lines = append(lines, fmt.Sprintf("Drained run '%s'.", t.run.ID))
	}
	r.ContextHint = strings.Join(lines, "\n")
	return &realmv1.DrainRunResponse{Reply: r}, nil
}

// voidFinalizer marks one pending finalizer voided by the operator, in one
// compare-and-set write, unless a drainer's live lease holds it (never
// bypassed).
func (e *Engine) voidFinalizer(ctx context.Context, req *realmv1.DrainRunRequest) (*realmv1.DrainRunResponse, error) {
	const command = "drain"
	name := req.GetVoid()
	var refusal string
	var expiredLease bool
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		refusal, expiredLease = "", false
		f := t.run.FinalizerLedger[name]
		switch {
		case f == nil:
			refusal = fmt.Sprintf("No finalizer ledger entry named '%s' on run '%s'.", name, t.run.ID)
		case f.Status != ledgerPending:
			refusal = fmt.Sprintf("Finalizer '%s' is '%s', not 'pending' — nothing to void.", name, f.Status)
		default:
			if until, held := leaseHeld(f, t.now); held {
				refusal = fmt.Sprintf("Finalizer '%s' has an active drain lease (expires %s) — a drainer is executing NOW. Wait for the lease to expire (bounded — leases are clamped to 300s) and retry. Not force-bypassable.", name, record.FormatTime(until))
				return nil
			}
			expiredLease = f.LeaseToken != ""
			f.Status, f.LeaseToken, f.LeaseDeadline = ledgerVoided, "", ""
			t.touch()
		}
		return nil
	})
	if reply, ok := readFailure(command, req.GetRunId(), err); ok {
		return &realmv1.DrainRunResponse{Reply: reply}, nil
	}
	if err != nil {
		return nil, err
	}
	r := t.envelope(command)
	if refusal != "" {
		t.refuse(r, errcode.StateTransitionDenied, refusal)
		r.NextActions = nil
		return &realmv1.DrainRunResponse{Reply: r}, nil
	}
	r.ContextHint = fmt.Sprintf("finalizer '%s' voided by operator", name)
	if expiredLease {
		r.ContextHint += " — may have executed without a recorded mark (its lease had already expired)"
	}
	return &realmv1.DrainRunResponse{Reply: r}, nil
}
