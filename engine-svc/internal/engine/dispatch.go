package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/quote"
	"github.com/realm-go/realm/pkg/template"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/pkg/workflow"
)

// defaultTimeout bounds an auto step's attempt when it declares none.
const defaultTimeout = 3600 * time.Second

// builtins are the handlers every engine has.
var builtins = map[string]bool{quote.HandlerName: true}

// adapterOf is the adapter a uses_service step calls.
func (t *txn) adapterOf(s *workflow.Step) string {
	if svc := t.def.Def.Services[s.UsesService]; svc != nil {
		return svc.Adapter
	}
	return s.UsesService
}

// capabilities are the live runners as one transaction read them: every
// step of one decision is judged on the same set.
type capabilities struct {
	live []*registry.Runner
}

// readCapabilities reads the live runners when the run can need them: its
// workflow has handler or service steps, or its record a capability block
// to judge. A registry that cannot be read serves nothing, so the steps
// wait, blocked on capability, rather than fail.
func (e *Engine) readCapabilities(ctx context.Context, def *compiled, run *record.Run) capabilities {
	if e.reg == nil || (def == nil || !def.usesRunners) && len(run.CapabilityBlocks) == 0 {
		return capabilities{}
	}
	live, err := e.reg.Live(ctx)
	if err != nil {
		return capabilities{}
	}
	return capabilities{live: live}
}

// serves reports whether a live runner serves a handler or an adapter.
func (c capabilities) serves(name string, adapter bool) bool {
	return slices.ContainsFunc(c.live, func(r *registry.Runner) bool {
		return !adapter && r.Has(name) || adapter && r.HasAdapter(name)
	})
}

// capableAdapter reports whether a live runner serves an adapter.
func (t *txn) capableAdapter(adapter string) bool { return t.caps.serves(adapter, true) }

// capable reports whether a handler can run here: a built-in, or a live
// runner serves it.
func (t *txn) capable(handler string) bool { return builtins[handler] || t.caps.serves(handler, false) }

// claimForDispatch marks a ready handler step in progress with a claim
// this call holds; the handler runs after the write commits. The claim
// has a deadline (renewed while the handler runs) unless the workflow has
// finalizers and the step is not idempotent: such a claim has an unknown
// age (run-record spec §6), so no sweep ever runs that step twice. An
// idempotent step's claim always has one, so the sweeper can recover it
// when its process dies, finalizers or not.
func (t *txn) claimForDispatch(s *workflow.Step) {
	c := &record.Claim{Token: uuid.NewString(), Holder: holderOf(t.caller), Since: t.stamp()}
	if !t.def.Def.HasFinalizers() || s.Idempotent {
		d := record.FormatTime(t.now.Add(t.claimWindowOf(s)))
		c.Deadline = &d
	}
	t.run.MarkInProgress(s.Name, c)
	delete(t.run.CapabilityBlocks, s.Name) // it runs now: the marker is history
	cl := claimed{step: s.Name, token: c.Token, input: t.handlerInput(s), resources: t.resources()}
	if s.UsesService != "" {
		cl.adapter = t.adapterOf(s)
		if svc := t.def.Def.Services[s.UsesService]; svc != nil {
			cl.trust, cl.rateLimit = svc.Trust, svc.RateLimit
			// One bucket per declared service of the workflow, on every
			// replica (the NUL keeps "a"+"b/c" and "a/b"+"c" apart).
			cl.bucket = t.run.WorkflowID + "\x00" + s.UsesService
		}
	}
	t.dispatch = append(t.dispatch, cl)
	t.touch()
}

// claimWindow is how long a claim is presumed live (run-record spec §6):
// the step's timeout across all its attempts plus a minute, never under 15
// minutes.
func claimWindow(s *workflow.Step) time.Duration {
	per := defaultTimeout
	if s.TimeoutSeconds > 0 {
		per = time.Duration(s.TimeoutSeconds) * time.Second
	}
	attempts := 1
	if s.Retry != nil && s.Retry.MaxAttempts > 1 {
		attempts = s.Retry.MaxAttempts
	}
	return max(per*time.Duration(attempts)+time.Minute, 15*time.Minute)
}

// claimWindowOf is claimWindow, or the engine's test override.
func (t *txn) claimWindowOf(s *workflow.Step) time.Duration {
	if t.e.claimWindow > 0 {
		return t.e.claimWindow
	}
	return claimWindow(s)
}

// claimed is a step this call claimed and will run.
type claimed struct {
	adapter   string // uses_service: the adapter, its service's trust label and rate_limit
	trust     string
	rateLimit map[string]any
	bucket    string
	step      string
	token     string
	input     map[string]any
	resources map[string]any
}

// resources are the outputs of the steps that have run, plus $settlement.
func (t *txn) resources() map[string]any {
	out := make(map[string]any, len(t.outputs)+1)
	for k, v := range t.outputs {
		out[k] = v
	}
	settle := map[string]any{}
	for k, v := range t.settlement() {
		settle[k] = v
	}
	out["$settlement"] = settle
	return out
}

// handlerInput is inputs.params: what the input_map builds ({} without one).
func (t *txn) handlerInput(s *workflow.Step) map[string]any {
	if len(s.InputMap) == 0 {
		return map[string]any{}
	}
	in, err := template.BuildInputMap(s.InputMap, template.Scope{Params: t.run.Params, Resources: t.resources()})
	if err != nil {
		return map[string]any{}
	}
	return in
}

// attempt is one try of a handler.
type attempt struct {
	n        int
	started  time.Time
	finished time.Time
	resp     *realmv1.ExecuteHandlerResponse
	err      string // why the try failed, as recorded
	code     errcode.Code
	details  map[string]any
	retry    bool // the failure may be tried again
	timeout  bool
	stale    bool // the runner did not have the handler after all
	// unreached: no runner took the call to its end (none live, none
	// reachable, or it died or dropped the call), so the handler may not
	// have run at all.
	unreached bool
	// clippedTo is the attempt's timeout when retry.total_timeout_seconds
	// left less than timeout_seconds (0: not clipped).
	clippedTo time.Duration
}

// outcome is everything a dispatched step did, recorded in one write.
type outcome struct {
	attempts []attempt
	// outOfTime: retry.total_timeout_seconds ran out (the next wait would
	// overrun it, or nothing of it was left for another attempt) while
	// the last failure could have been tried again.
	outOfTime bool
}

func (o *outcome) last() *attempt { return &o.attempts[len(o.attempts)-1] }

// runStep runs a claimed step's handler with the step's deadline, trying
// again per its retry block when the failure is retryable.
func (e *Engine) runStep(ctx context.Context, runID string, run *record.Run, s *workflow.Step, c claimed) outcome {
	var out outcome
	maxAttempts := 1
	if s.Retry != nil && s.Retry.MaxAttempts > 1 {
		maxAttempts = s.Retry.MaxAttempts
	}
	per := defaultTimeout
	if s.TimeoutSeconds > 0 {
		per = time.Duration(s.TimeoutSeconds) * time.Second
	}
	// The budget of every attempt and wait together (spec §12.2).
	var budgetEnd time.Time
	if s.Retry != nil && s.Retry.TotalTimeoutSeconds > 0 {
		budgetEnd = time.Now().Add(time.Duration(s.Retry.TotalTimeoutSeconds) * time.Second)
	}
	for n := 1; n <= maxAttempts; n++ {
		if n > 1 {
			d := backoff(s.Retry, n)
			if !budgetEnd.IsZero() && !time.Now().Add(d).Before(budgetEnd) {
				out.outOfTime = true
				break
			}
			if d > 0 {
				select {
				case <-ctx.Done():
					return out
				case <-time.After(d):
				}
			}
		}
		timeout, clipped := per, time.Duration(0)
		if !budgetEnd.IsZero() {
			if left := time.Until(budgetEnd); left < per {
				timeout, clipped = left, left
			}
		}
		a := e.tryOnce(ctx, runID, run, s, c, n, timeout)
		a.clippedTo = clipped
		a.finished = time.Now()
		out.attempts = append(out.attempts, a)
		if a.err == "" || !a.retry || (a.timeout && (s.Retry == nil || !s.Retry.OnTimeout)) {
			break
		}
	}
	return out
}

// backoff is the wait before attempt n (spec §12.2).
func backoff(r *workflow.Retry, n int) time.Duration {
	if r == nil || r.BaseDelayMS <= 0 {
		return 0
	}
	var ms float64
	switch r.Backoff {
	case "linear":
		ms = float64(n-1) * r.BaseDelayMS
	case "exponential":
		ms = math.Pow(2, float64(n-2)) * r.BaseDelayMS
	default:
		ms = r.BaseDelayMS
	}
	if r.MaxDelayMS > 0 && ms > r.MaxDelayMS {
		ms = r.MaxDelayMS
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// pastDeadline reports whether a call's deadline has passed. An answer that
// arrives after it (the runner saw its context end and replied at once) is
// a timeout all the same: the deadline decides, not which of the reply and
// the context's own timer, late on a loaded machine, comes first.
func pastDeadline(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func (e *Engine) tryOnce(ctx context.Context, runID string, run *record.Run, s *workflow.Step, c claimed, n int, per time.Duration) attempt {
	a := attempt{n: n, started: time.Now()}
	cctx, cancel := context.WithTimeout(ctx, per)
	defer cancel()
	if s.UsesService != "" {
		return e.callAdapter(cctx, a, runID, s, c, per)
	}
	if builtins[s.Handler] {
		out, warn, err := quote.CheckQuotes(s.Config, c.resources)
		if err != nil {
			a.err, a.code = err.Error(), errcode.EngineHandlerFailed
			if ce, ok := errcode.As(err); ok {
				a.err, a.code = ce.Message, ce.Code
			}
			return a
		}
		a.resp = &realmv1.ExecuteHandlerResponse{Data: toValue(out)}
		if warn != "" {
			a.resp.Warn = &warn
		}
		return a
	}
	r, err := e.reg.Pick(ctx, s.Handler, false)
	if err != nil || r == nil {
		a.err, a.code, a.retry, a.unreached = fmt.Sprintf("Handler '%s' is not registered on any live runner.", s.Handler), errcode.EngineHandlerNotRegistered, true, true
		return a
	}
	conn, err := e.conns.get(r)
	if err != nil {
		a.err, a.code, a.retry, a.unreached = fmt.Sprintf("Runner '%s' at %s could not be reached: %v", r.Name, r.Endpoint, err), errcode.EngineHandlerFailed, true, true
		return a
	}
	req := &realmv1.ExecuteHandlerRequest{
		Handler: s.Handler, RunId: runID, Step: s.Name, Attempt: int32(n),
		Inputs: toStruct(map[string]any{"params": c.input}), RunParams: toStruct(run.Params),
		Config: toStruct(orEmpty(s.Config)), Resources: toStruct(c.resources),
	}
	resp, err := realmv1.NewRunnerServiceClient(conn).ExecuteHandler(cctx, req)
	if ce, ok := errcode.FromStatus(err); ok && ce.Code == errcode.EngineHandlerNotRegistered {
		// The registry named a runner that no longer has the handler: the
		// step is blocked on capability, not failed.
		a.err, a.code, a.stale = ce.Message, ce.Code, true
		return a
	}
	switch {
	case err == nil && !pastDeadline(cctx):
	case pastDeadline(cctx) || status.Code(err) == codes.DeadlineExceeded:
		a.err, a.code, a.timeout, a.retry = fmt.Sprintf("Step '%s' timed out after %dms", s.Name, per.Milliseconds()), errcode.StepTimeout, true, true
		return a
	default:
		// The runner died or dropped the call: the attempt failed, and
		// another runner (or this one, back) may take the next.
		a.err, a.code, a.retry, a.unreached = fmt.Sprintf("Runner '%s' at %s failed the call: %v", r.Name, r.Endpoint, status.Convert(err).Message()), errcode.EngineHandlerFailed, true, true
		return a
	}
	if he := resp.GetError(); he != nil {
		if he.GetCode() == "" {
			a.err, a.code = fmt.Sprintf("Handler '%s' threw: %s", s.Handler, he.GetMessage()), errcode.EngineHandlerFailed
			return a
		}
		a.err, a.code, a.retry = he.GetMessage(), errcode.Code(he.GetCode()), he.GetRetryable()
		a.details = he.GetDetails().AsMap()
		return a
	}
	if err := WithinSize(fmt.Sprintf("The output of handler '%s'", s.Handler), resp.GetData(), MaxValueBytes); resp.Data != nil && err != nil {
		ce, _ := errcode.As(err)
		a.err, a.code = ce.Message, ce.Code
		return a
	}
	if resp.Data == nil && resp.AbortMessage == nil {
		a.err, a.code = fmt.Sprintf("Handler '%s' returned nothing: a handler returns data, a warning or an abort.", s.Handler), errcode.EngineHandlerFailed
		return a
	}
	a.resp = resp
	return a
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// drive runs the steps a write claimed, records each one's outcome as it
// finishes, lets the write of the batch's last outcome advance the run
// (which may claim more), and so on until nothing is claimed. Ready steps
// of parallel branches run at once; a fast one is recorded while a slow
// one still runs, so a crash then redoes only the slow one.
func (e *Engine) drive(ctx context.Context, t *txn) error {
	e.drives.Add(1)
	defer e.drives.Done()
	for len(t.dispatch) > 0 {
		batch := t.dispatch
		outs := make([]outcome, len(batch))
		finished := make(chan int, len(batch))
		// The handlers see the run as claimed; t.run moves on as their
		// outcomes are recorded.
		run := t.run
		for i, c := range batch {
			s := t.stepOf(c.step)
			go func() {
				outs[i] = e.runStep(ctx, run.ID, run, s, c)
				finished <- i
			}()
		}
		// The claims of the batch's running steps are renewed until their
		// outcomes are recorded; a recorded step's claim is gone, so the
		// heartbeat leaves it alone.
		hbCtx, stopHeartbeat := context.WithCancel(ctx)
		beating := make(chan struct{})
		every := time.Duration(0)
		for _, c := range batch {
			if s := t.stepOf(c.step); s != nil && (every == 0 || t.claimWindowOf(s)/3 < every) {
				every = t.claimWindowOf(s) / 3
			}
		}
		go func() {
			defer close(beating)
			e.renewClaims(hbCtx, run.ID, batch, every)
		}()
		var unrecorded []int
		var failed error
		for left := len(batch); left > 0; left-- {
			i := <-finished
			if ctx.Err() != nil || failed != nil {
				unrecorded = append(unrecorded, i)
				continue
			}
			// The last outcome's write also advances the run: the next
			// steps start from a record that holds the whole batch.
			last := left == 1
			t2, err := e.update(ctx, t.run.ID, func(t2 *txn) error {
				t2.caller = t.caller
				t2.settleDispatched(batch[i], outs[i])
				if last && !t2.run.Terminal() {
					t2.advance(advanceOpts{decideGuards: true, chain: true})
				}
				return nil
			})
			if err != nil {
				failed = err
				unrecorded = append(unrecorded, i)
				continue
			}
			t.adopt(t2)
		}
		stopHeartbeat()
		<-beating
		rest := make([]claimed, len(unrecorded))
		restOuts := make([]outcome, len(unrecorded))
		for k, i := range unrecorded {
			rest[k], restOuts[k] = batch[i], outs[i]
		}
		if ctx.Err() != nil {
			// The call ended (its caller left, or the server is shutting
			// down) while handlers ran: keep what finished, release the
			// rest, and claim nothing more.
			return e.settleAbandoned(ctx, t, rest, restOuts)
		}
		if ce, ok := errcode.As(failed); ok && ce.Code == errcode.StateSnapshotMismatch {
			// Every try lost its race: the outcomes cannot be recorded.
			// Free the claims (one more write, with its own tries) so the
			// steps can run again at once instead of after their deadline,
			// and say so.
			released := e.releaseClaims(ctx, t, rest)
			return errcode.Newf(errcode.StateSnapshotMismatch,
				"%s The results of %s were not recorded; %d claim(s) released, so the step(s) can run again.", ce.Message, quoteSteps(rest), released)
		}
		if failed != nil {
			return failed
		}
	}
	if t.run.Terminal() && len(pendingFinalizers(t.run)) > 0 {
		// The process that sealed the run delivers its finalizers; one it
		// cannot run stays pending for `realm run drain`.
		if _, err := e.drainFinalizers(ctx, t.run.ID, t.caller); err != nil {
			return err
		}
		after, err := e.read(ctx, t.run.ID)
		if err != nil {
			return err
		}
		t.run, t.outputs, t.ownOutputs = after.run, after.outputs, after.ownOutputs
	}
	return nil
}

// renewClaims pushes the deadlines of the batch's claims (those that have
// one) a claim window ahead every so often (every: a third of the
// shortest window) until ctx ends; a claim no longer this call's is left
// alone.
func (e *Engine) renewClaims(ctx context.Context, runID string, batch []claimed, every time.Duration) {
	if e.leaseRenewEvery > 0 {
		every = e.leaseRenewEvery
	}
	if every <= 0 {
		return
	}
	ticking(ctx, every, func() bool {
		_, err := e.update(ctx, runID, func(t *txn) error {
			for _, c := range batch {
				cl, s := t.run.Claims[c.step], t.stepOf(c.step)
				if cl == nil || cl.Token != c.token || cl.Deadline == nil || s == nil {
					continue
				}
				n := *cl
				d := record.FormatTime(t.now.Add(t.claimWindowOf(s)))
				n.Deadline = &d
				t.run.Claims[c.step] = &n
				t.maint, t.keepUpdatedAt = true, true
				t.touch()
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			e.log.Warn("could not renew the claims of running steps", "run_id", runID, "err", err)
		}
		return true
	})
}

// ticking calls fn every interval until ctx ends or fn returns false.
func ticking(ctx context.Context, every time.Duration, fn func() (more bool)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !fn() {
				return
			}
		}
	}
}

// releaseClaims frees the batch's claims that are still this call's and
// returns how many it freed; on failure they wait for their deadline.
func (e *Engine) releaseClaims(ctx context.Context, t *txn, batch []claimed) int {
	released, err := e.endClaims(ctx, t, batch, nil)
	if err != nil {
		e.log.WarnContext(ctx, "could not release the claims of unrecorded steps; they wait for their deadline", "run_id", t.run.ID, "err", err)
		return 0
	}
	return released
}

// endClaims is the last write of a call that cannot go on: each claimed
// step is kept when keep says so (having recorded it on t2), else its
// claim is freed (back to pending, nothing recorded). A write that kept an
// outcome then settles what the record alone decides (skips, guards, and
// the run's end when no step is left), but claims nothing: with the
// call's last step recorded, no later caller may come to end the run. It
// has its own short deadline, as the call's context may be done. It
// returns how many claims it freed.
func (e *Engine) endClaims(ctx context.Context, t *txn, batch []claimed, keep func(t2 *txn, i int) bool) (int, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	released := 0
	_, err := e.update(wctx, t.run.ID, func(t2 *txn) error {
		t2.caller = t.caller
		released = 0
		kept := false
		for i, c := range batch {
			if keep != nil && keep(t2, i) {
				kept = true
				continue
			}
			if t2.freeClaim(c) {
				released++
			}
		}
		if kept && !t2.run.Terminal() {
			t2.advance(advanceOpts{decideGuards: true})
		}
		return nil
	})
	return released, err
}

// freeClaim puts a claimed step back to pending, nothing recorded, if its
// claim is still this call's.
func (t *txn) freeClaim(c claimed) bool {
	cl := t.run.Claims[c.step]
	if cl == nil || cl.Token != c.token {
		return false
	}
	t.run.InProgressSteps = slices.DeleteFunc(t.run.InProgressSteps, func(x string) bool { return x == c.step })
	delete(t.run.Claims, c.step)
	t.touch()
	return true
}

// quoteSteps names a batch's steps: 'a', 'b'.
func quoteSteps(batch []claimed) string {
	names := make([]string, len(batch))
	for i, c := range batch {
		names[i] = "'" + c.step + "'"
	}
	return strings.Join(names, ", ")
}

// releaseTimeout bounds the write that releases an ended call's claims.
const releaseTimeout = 5 * time.Second

// settleAbandoned is drive's last write for a call whose context ended
// while its handlers ran. A step whose handler answered is recorded as
// usual; a step whose attempt failed (cut off with the call, most likely)
// has its claim released, back to pending with nothing recorded, so
// another caller or replica can run it at once rather than after the claim
// deadline (at least 15 minutes). Nothing further is claimed: the next
// execute_step or advance_run goes on from the record; but a run the
// recorded outcomes finish is ended by this write. The write uses its
// own short deadline, as the call's context is already done.
func (e *Engine) settleAbandoned(ctx context.Context, t *txn, batch []claimed, outs []outcome) error {
	// A step whose handler answered is recorded as usual.
	released, err := e.endClaims(ctx, t, batch, func(t2 *txn, i int) bool {
		if len(outs[i].attempts) > 0 && outs[i].last().err == "" {
			t2.settleDispatched(batch[i], outs[i])
			return true
		}
		return false
	})
	if err != nil {
		e.log.WarnContext(ctx, "could not release the claims of an ended call; they wait for their deadline", "run_id", t.run.ID, "err", err)
		return err
	}
	if released > 0 {
		e.log.InfoContext(ctx, "released the claims of an ended call", "run_id", t.run.ID, "steps", released)
	}
	return ctx.Err()
}

// WaitDrives waits, at most timeout, for the calls that are running
// handlers to finish: after the gRPC server stopped, each writes its last
// record (or releases its claims) before the store is closed. It reports
// whether they all finished.
func (e *Engine) WaitDrives(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { e.drives.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// adopt takes a later write's run and what it did, so the reply of the
// call is composed from the record as the call ends.
func (t *txn) adopt(t2 *txn) {
	t.run, t.outputs, t.traces, t.def = t2.run, t2.outputs, t2.traces, t2.def
	t.effects.merge(&t2.effects)
}

// stepFailure is a dispatched step that failed in this call.
type stepFailure struct {
	step, msg  string
	code       errcode.Code
	details    map[string]any
	terminated bool
}

// settleDispatched records what a dispatched step did, if its claim is
// still this call's: a step another process settled, took over or
// released, or a run that ended meanwhile, keeps its record.
func (t *txn) settleDispatched(c claimed, o outcome) {
	s := t.stepOf(c.step)
	cl := t.run.Claims[c.step]
	switch {
	case cl == nil && t.run.IsSettled(c.step):
		t.notes = append(t.notes, fmt.Sprintf("'%s' ran here, but another process settled it first, so its outcome was not recorded.", c.step))
		return
	case t.run.Terminal():
		t.notes = append(t.notes, fmt.Sprintf("'%s' ran here, but the run ended before its outcome was recorded.", c.step))
		return
	case cl == nil:
		t.notes = append(t.notes, fmt.Sprintf("'%s' ran here, but another process removed its claim, so its outcome was not recorded.", c.step))
		return
	case cl.Token != c.token:
		t.notes = append(t.notes, fmt.Sprintf("'%s' ran here, but another process took it over, so its outcome was not recorded.", c.step))
		return
	case s == nil || len(o.attempts) == 0:
		return
	case o.last().stale:
		// Back to pending, blocked on capability: nothing ran.
		t.run.InProgressSteps = slices.DeleteFunc(t.run.InProgressSteps, func(x string) bool { return x == c.step })
		delete(t.run.Claims, c.step)
		t.markCapabilityBlock(s)
		return
	}
	if a := o.last(); a.err == "" && a.resp != nil && a.resp.AbortMessage == nil {
		if total, ok := t.outputsFit(c.step, dataOf(a.resp)); !ok {
			// Recorded, it would break every later handler call (each
			// carries the outputs) and the export: the step fails instead.
			ce := runOutputsTooLarge(c.step, total)
			a.err, a.code, a.retry, a.resp = ce.Message, ce.Code, false, nil
		}
	}
	withAttempts := s.Retry != nil
	for i := range o.attempts {
		a := &o.attempts[i]
		e := &record.Entry{StepID: c.step, Status: "success", StartedAt: record.FormatTime(a.started), CompletedAt: record.FormatTime(a.finished),
			DurationMS: a.finished.Sub(a.started).Milliseconds(), InputSummary: c.input, DrivenBy: holderOf(t.caller)}
		if len(s.InputMap) > 0 {
			e.ResolvedParams = c.input
		}
		if withAttempts {
			e.Attempt = a.n
		}
		per := int(defaultTimeout / time.Second)
		if s.TimeoutSeconds > 0 {
			per = s.TimeoutSeconds
		}
		e.EffectiveTimeut = per
		if a.clippedTo > 0 {
			e.ClippedToMS = max(a.clippedTo.Milliseconds(), 1)
		}
		if i == len(o.attempts)-1 && o.outOfTime {
			e.ExhaustedBy = "total_timeout"
		}
		switch {
		case a.err != "":
			e.Status, e.Error, e.OutputSummary = "error", a.err, map[string]any{}
			if withAttempts {
				e.Error = fmt.Sprintf("%s (attempt %d)", a.err, a.n)
			}
		case a.resp.AbortMessage != nil:
			e.Status = "skipped"
			e.OutputSummary = map[string]any{"aborted": true, "abort_message": a.resp.GetAbortMessage()}
		default:
			e.OutputSummary = dataOf(a.resp)
			if w := a.resp.GetWarn(); w != "" {
				e.Warn = w
			}
		}
		t.appendEvidence(e)
	}
	last := o.last()
	switch {
	case last.err != "":
		msg, code, details := last.err, last.code, last.details
		if withAttempts && (len(o.attempts) > 1 || o.outOfTime) && last.retry {
			code = errcode.StepRetryExhausted
			by := "attempts"
			if o.outOfTime {
				by = "total_timeout"
			}
			details = map[string]any{"stepName": c.step, "attempts": len(o.attempts), "lastError": last.err, "exhausted_by": by}
			msg = fmt.Sprintf("Step '%s' failed after %d attempts", c.step, len(o.attempts))
		}
		terminated := t.failStep(c.step, msg)
		t.failed = &stepFailure{step: c.step, msg: msg, code: code, details: details, terminated: terminated}
	case last.resp.AbortMessage != nil:
		msg := last.resp.GetAbortMessage()
		out := map[string]any{"aborted": true, "abort_message": msg}
		t.setOutput(c.step, out)
		t.run.MarkSkipped(c.step, &record.SkipDetail{Kind: "handler_abort"})
		t.run.AbortedAt = &record.AbortedAt{StepID: c.step, AbortMessage: msg}
		t.abortRest("handler_abort")
		t.run.Seal(record.ArmHandlerAbort, c.step, fmt.Sprintf("Handler '%s' aborted the run: %s", c.step, msg))
		t.abortedBy = c.step
	default:
		out := dataOf(last.resp)
		var warns []string
		if w := last.resp.GetWarn(); w != "" {
			warns = append(warns, w)
			t.warnings = append(t.warnings, w)
		}
		if s.Gated() && !s.GatedBefore() {
			// The work ran first; its output is what the person decides on.
			if err := t.openGate(s, out, t.caller); err != nil {
				t.gateErr, t.gateErrStep = err, c.step
			}
			return
		}
		t.setOutput(c.step, out)
		token := c.token
		t.run.MarkCompleted(c.step, &record.Settled{Token: &token, Outcome: "complete"})
		t.chain(c.step, warns...)
		t.lastAuto = c.step
		t.completedArm = ""
	}
}

// dataOf is a handler's recorded output: its data (any JSON), or {} when
// it returned none with a warning.
func dataOf(r *realmv1.ExecuteHandlerResponse) any {
	if r.Data == nil {
		return map[string]any{}
	}
	return r.Data.AsInterface()
}

// throttle waits until the service's shared bucket lets one more call
// through: requests_per_second, burst (default requests_per_second). The
// spec's limiter is per process; here every engine replica on the store
// draws on one bucket, so together they keep the rate. A Redis error lets
// the call go (the runner's own per-process limiter still applies) and is
// logged.
func (e *Engine) throttle(ctx context.Context, bucket string, rl map[string]any) {
	rps, _ := rl["requests_per_second"].(float64)
	if e.limits == nil || !(rps > 0) || math.IsInf(rps, 0) {
		return
	}
	burst := max(int(math.Ceil(rps)), 1)
	if b, ok := rl["burst"].(float64); ok && b >= 1 {
		burst = int(b)
	}
	for {
		wait, err := e.limits.Take(ctx, bucket, rps, burst)
		if err != nil {
			e.log.Warn("service rate limit unavailable; the call goes with the runner's own limit", "err", err)
			return
		}
		if wait <= 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// connPool keeps one client connection per runner endpoint (and
// certificate name).
type connPool struct {
	mu   sync.Mutex
	m    map[string]*grpc.ClientConn
	opts []grpc.DialOption // added to every runner connection
}

func (p *connPool) get(r *registry.Runner) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := r.Endpoint + "\x00" + r.Owner
	if c, ok := p.m[key]; ok {
		return c, nil
	}
	// The tracing options carry the caller's trace to the runner (spans
	// only once tracing.Setup configures an exporter).
	opts := append(append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, tracing.DialOptions()...), p.opts...)
	if r.Owner != "" {
		// Over mutual TLS the runner must present the certificate that
		// registered it: its name, not the address it advertised (a pod
		// IP no certificate can name in advance), is what is verified.
		opts = append(opts, grpc.WithAuthority(r.Owner))
	}
	c, err := grpc.NewClient(r.Endpoint, opts...)
	if err != nil {
		return nil, err
	}
	if p.m == nil {
		p.m = map[string]*grpc.ClientConn{}
	}
	p.m[key] = c
	return c, nil
}

// Close closes every runner connection.
func (p *connPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.m {
		c.Close()
	}
	p.m = nil
}

// markCapabilityBlock records, once, that this engine reached a step whose
// handler no live runner serves: the step is blocked, not failed, and runs
// when a runner that has it registers and someone calls advance_run.
func (t *txn) markCapabilityBlock(s *workflow.Step) {
	if _, ok := t.run.CapabilityBlocks[s.Name]; ok {
		return
	}
	if t.run.CapabilityBlocks == nil {
		t.run.CapabilityBlocks = map[string]*record.CapabilityBlock{}
	}
	kind, name, code := record.RequireHandler, s.Handler, errcode.EngineHandlerNotRegistered
	if s.UsesService != "" {
		kind, name, code = record.RequireAdapter, t.adapterOf(s), errcode.EngineAdapterNotRegistered
	}
	t.run.CapabilityBlocks[s.Name] = &record.CapabilityBlock{
		Requirement: record.Requirement{Kind: kind, Name: name},
		Code:        string(code),
		At:          t.stamp(),
	}
	t.blocked = append(t.blocked, s)
	t.warnings = append(t.warnings, fmt.Sprintf("Step '%s' is blocked: its %s '%s' is not registered in this runner.", s.Name, kind, name))
	t.touch()
}

// callAdapter runs a uses_service step on a live runner that serves its
// adapter (spec §13.1): method service_method (default fetch), operation
// the step's operation (else its name), params what the input_map built,
// config {adapter, trust} with the step's config merged on top.
func (e *Engine) callAdapter(ctx context.Context, a attempt, runID string, s *workflow.Step, c claimed, per time.Duration) attempt {
	adapter, trust := c.adapter, c.trust
	r, err := e.reg.Pick(ctx, adapter, true)
	if err != nil || r == nil {
		a.err, a.code, a.stale = fmt.Sprintf("Adapter '%s' is not registered on any live runner.", adapter), errcode.EngineAdapterNotRegistered, true
		return a
	}
	conn, err := e.conns.get(r)
	if err != nil {
		a.err, a.code, a.retry = fmt.Sprintf("Runner '%s' at %s could not be reached: %v", r.Name, r.Endpoint, err), errcode.EngineAdapterFailed, true
		return a
	}
	config := map[string]any{"adapter": adapter}
	if trust != "" {
		config["trust"] = trust
	}
	for k, v := range s.Config {
		config[k] = v
	}
	// Set last, so a step cannot override them: the service's name keys the
	// runner's rate limiter, and its rate_limit is the service's, not the step's.
	config["service"] = s.UsesService
	if c.rateLimit != nil {
		config["rate_limit"] = c.rateLimit
	}
	// Excess calls wait (spec §3.4), within the attempt's deadline: a
	// waiting step's recorded duration includes the wait.
	e.throttle(ctx, c.bucket, c.rateLimit)
	method := s.ServiceMethod
	if method == "" {
		method = "fetch"
	}
	op := s.Operation
	if op == "" {
		op = s.Name
	}
	resp, err := realmv1.NewRunnerServiceClient(conn).CallAdapter(ctx, &realmv1.CallAdapterRequest{
		Adapter: adapter, Method: method, Operation: op, Params: toStruct(c.input), Config: toStruct(config), RunId: runID, Step: s.Name,
	})
	if ce, ok := errcode.FromStatus(err); ok && ce.Code == errcode.EngineAdapterNotRegistered {
		a.err, a.code, a.stale = ce.Message, ce.Code, true
		return a
	}
	switch {
	case err == nil && !pastDeadline(ctx):
	case pastDeadline(ctx) || status.Code(err) == codes.DeadlineExceeded:
		a.err, a.code, a.timeout, a.retry = fmt.Sprintf("Step '%s' timed out after %dms", s.Name, per.Milliseconds()), errcode.StepTimeout, true, true
		return a
	default:
		a.err, a.code, a.retry = fmt.Sprintf("Runner '%s' at %s failed the call: %v", r.Name, r.Endpoint, status.Convert(err).Message()), errcode.EngineAdapterFailed, true
		return a
	}
	if he := resp.GetError(); he != nil {
		if he.GetCode() == "" {
			a.err, a.code = fmt.Sprintf("Adapter '%s' threw: %s", adapter, he.GetMessage()), errcode.EngineAdapterFailed
			return a
		}
		a.err, a.code, a.retry = he.GetMessage(), errcode.Code(he.GetCode()), he.GetRetryable()
		a.details = he.GetDetails().AsMap()
		return a
	}
	if err := WithinSize(fmt.Sprintf("The answer of adapter '%s'", c.adapter), resp.GetData(), MaxValueBytes); err != nil {
		ce, _ := errcode.As(err)
		a.err, a.code = ce.Message, ce.Code
		return a
	}
	// An adapter answers {status, data}: an object data is the output; any
	// other answer is recorded whole (spec §13.1).
	var data any
	switch ans := resp.GetData().AsInterface().(type) {
	case map[string]any:
		if inner, ok := ans["data"].(map[string]any); ok {
			data = inner
		} else {
			data = ans
		}
	default:
		data = map[string]any{"data": ans}
	}
	a.resp = &realmv1.ExecuteHandlerResponse{Data: toValue(data)}
	return a
}
