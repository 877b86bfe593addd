package server_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// batch is what one batch stream sent: its items, progress and summary.
type batch struct {
	items    []*realmv1.OperatorItem
	progress []*realmv1.OperatorProgress
	summary  *realmv1.OperatorSummary
}

// ids are the run ids of the items with outcome, sorted.
func (b batch) ids(outcome string) []string {
	var out []string
	for _, it := range b.items {
		if it.GetOutcome() == outcome {
			out = append(out, it.GetRunId())
		}
	}
	slices.Sort(out)
	return out
}

// readBatch reads a batch stream to its end.
func readBatch[R any, PR interface {
	*R
	GetEvent() *realmv1.OperatorEvent
}](t *testing.T, stream grpc.ServerStreamingClient[R], err error) batch {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var b batch
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if b.summary == nil {
				t.Fatal("the stream ended without a summary")
			}
			return b
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := PR(resp).GetEvent().GetEvent().(type) {
		case *realmv1.OperatorEvent_Item:
			b.items = append(b.items, e.Item)
		case *realmv1.OperatorEvent_Progress:
			b.progress = append(b.progress, e.Progress)
		case *realmv1.OperatorEvent_Summary:
			b.summary = e.Summary
		}
	}
}

func (e *env) purgeRuns(t *testing.T, req *realmv1.PurgeRunsRequest) batch {
	t.Helper()
	s, err := e.client.PurgeRuns(ctx(t), req)
	return readBatch(t, s, err)
}

func (e *env) drainRuns(t *testing.T, req *realmv1.DrainRunsRequest) batch {
	t.Helper()
	s, err := e.client.DrainRuns(ctx(t), req)
	return readBatch(t, s, err)
}

// present is the sorted subset of runs whose document is still stored.
func (e *env) present(t *testing.T, runs ...string) []string {
	t.Helper()
	var out []string
	for _, r := range runs {
		if _, err := e.st.LoadRun(ctx(t), r); err == nil {
			out = append(out, r)
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(xs ...string) []string { slices.Sort(xs); return xs }

func TestPurgeOlderThanSelectsEndedRunsIdleThatLongOfOneWorkflowAndDryRunRemovesNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		e.register(t, []byte(strings.Replace(answerWorkflow, "id: answer", "id: other", 1)))
		old1, old2 := e.answered(t, "a", ""), e.answered(t, "b", "")
		open := e.startKeyed(t, "open", "")
		otherRun := start(t, e, "other", nil).GetRunId()
		if r := step(t, e, otherRun, "answer", map[string]any{"text": "hi"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("other: %v", r)
		}
		e.clock.Advance(3 * time.Hour)
		young := e.answered(t, "young", "")
		all := []string{old1, old2, open, otherRun, young}

		req := &realmv1.PurgeRunsRequest{OlderThanSeconds: 3600, WorkflowId: "answer"}
		dry := e.purgeRuns(t, req)
		if got, want := dry.ids("would"), sorted(old1, old2); !slices.Equal(got, want) {
			t.Fatalf("dry run selected %v, want %v (items %v)", got, want, dry.items)
		}
		if s := dry.summary; s.GetSelected() != 2 || s.GetDone() != 0 || s.GetSizeBytes() == 0 {
			t.Errorf("dry summary = %v", s)
		}
		if got := e.present(t, all...); !slices.Equal(got, sorted(all...)) {
			t.Fatalf("the dry run removed runs: left %v of %v", got, all)
		}

		req.Force = true
		done := e.purgeRuns(t, req)
		if got := done.ids("done"); !slices.Equal(got, sorted(old1, old2)) || done.summary.GetDone() != 2 {
			t.Fatalf("force purged %v (summary %v)", got, done.summary)
		}
		if got, want := e.present(t, all...), sorted(open, otherRun, young); !slices.Equal(got, want) {
			t.Fatalf("left %v, want %v: only the old ended runs of 'answer' go", got, want)
		}
		// Without --workflow every ended run old enough goes; never the open one.
		rest := e.purgeRuns(t, &realmv1.PurgeRunsRequest{OlderThanSeconds: 3600, Force: true})
		if got := rest.ids("done"); !slices.Equal(got, []string{otherRun}) {
			t.Fatalf("second purge = %v", got)
		}
		if got, want := e.present(t, all...), sorted(open, young); !slices.Equal(got, want) {
			t.Errorf("left %v, want %v", got, want)
		}
	})
}

func TestPurgeOlderThanBlocksRunsOwingCleanupAndSkipsClaimsOfUnknownAge(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		var charges atomic.Int64
		startRunner(t, e, map[string]handlerFunc{"charge": okHandler(t, &charges)})
		e.register(t, []byte(withFinalizer))
		e.register(t, []byte(answerWorkflow))
		owing := start(t, e, "charged", nil).GetRunId() // audit has no runner: left pending
		claimed := e.answered(t, "claimed", "")
		e.editDoc(t, claimed, func(d map[string]any) {
			d["claims"] = map[string]any{"answer": map[string]any{"token": "t0", "deadline": nil}}
		})
		e.clock.Advance(2 * time.Hour)
		b := e.purgeRuns(t, &realmv1.PurgeRunsRequest{OlderThanSeconds: 3600, Force: true})
		lines := map[string]string{}
		for _, it := range b.items {
			lines[it.GetRunId()] = it.GetOutcome() + ": " + it.GetLine()
		}
		if lines[owing] != "blocked: drain_pending" {
			t.Errorf("run owing cleanup: %q", lines[owing])
		}
		if want := fmt.Sprintf("warned: step 'answer' has a claim of unknown age — skipped in batch mode; to purge it, name it: realm run purge %s", claimed); lines[claimed] != want {
			t.Errorf("run with an unknown-age claim: %q", lines[claimed])
		}
		if s := b.summary; s.GetDone() != 0 || s.GetBlocked() != 1 || s.GetWarned() != 1 {
			t.Errorf("summary = %v", s)
		}
		if got := e.present(t, owing, claimed); len(got) != 2 {
			t.Errorf("left %v, want both", got)
		}
	})
}

func TestBatchActsReadTheStoreAPageAtATime(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		const runs, page = 250, 20
		e.register(t, []byte(answerWorkflow))
		for i := range runs {
			e.startKeyed(t, fmt.Sprint("k", i), "")
		}
		e.clock.Advance(2 * time.Hour)
		check := func(name string, b batch) {
			t.Helper()
			s := b.summary
			if s.GetScanned() != runs || s.GetLargestPage() > page || s.GetPages() < runs/page || int64(len(b.progress)) != s.GetPages() {
				t.Errorf("%s: summary %v with %d progress events; want %d runs read in pages of at most %d", name, s, len(b.progress), runs, page)
			}
			var total int64
			for _, p := range b.progress {
				if p.GetBatch() > page || p.GetBatch() <= 0 {
					t.Errorf("%s: a page read %d runs (page size %d)", name, p.GetBatch(), page)
				}
				total += int64(p.GetBatch())
				if p.GetScanned() != total {
					t.Errorf("%s: progress says %d read, the pages add up to %d", name, p.GetScanned(), total)
				}
			}
		}
		// Every run is open: purge reads them all and selects none.
		purge := e.purgeRuns(t, &realmv1.PurgeRunsRequest{OlderThanSeconds: 3600, PageSize: page, Force: true})
		check("purge", purge)
		if purge.summary.GetSelected() != 0 {
			t.Errorf("purge selected open runs: %v", purge.summary)
		}
		gc, err := e.client.GcRuns(ctx(t), &realmv1.GcRunsRequest{Heal: true, PageSize: page})
		if err != nil {
			t.Fatal(err)
		}
		if gc.GetRunsScanned() != runs || gc.GetLargestPage() > page || gc.GetPages() < runs/page || len(gc.GetStale()) != 0 {
			t.Errorf("gc --heal read %d runs in %d pages of at most %d (page %d), stale %v", gc.GetRunsScanned(), gc.GetPages(), gc.GetLargestPage(), page, gc.GetStale())
		}
		// No run owes cleanup: drain walks the cleanup index, which is
		// empty, and reads no run at all.
		drain := e.drainRuns(t, &realmv1.DrainRunsRequest{PageSize: page})
		if drain.summary.GetScanned() != 0 || drain.summary.GetSelected() != 0 {
			t.Errorf("drain = %v", drain.summary)
		}
	})
}

func TestDrainAllDeliversOwedCleanupAcrossTheStoreOnlyWithForce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		var charges, audits atomic.Int64
		startRunner(t, e, map[string]handlerFunc{"charge": okHandler(t, &charges)})
		e.register(t, []byte(withFinalizer))
		owing := []string{start(t, e, "charged", nil).GetRunId(), start(t, e, "charged", nil).GetRunId()}
		slices.Sort(owing)
		dry := e.drainRuns(t, &realmv1.DrainRunsRequest{})
		if got := dry.ids("would"); !slices.Equal(got, owing) {
			t.Fatalf("dry drain selected %v, want %v", got, owing)
		}
		startRunner(t, e, map[string]handlerFunc{"audit": okHandler(t, &audits)})
		if audits.Load() != 0 {
			t.Fatal("the dry run ran a finalizer")
		}
		done := e.drainRuns(t, &realmv1.DrainRunsRequest{Force: true})
		if got := done.ids("done"); !slices.Equal(got, owing) || audits.Load() != 2 {
			t.Fatalf("drained %v with %d audits (items %v)", got, audits.Load(), done.items)
		}
		again := e.drainRuns(t, &realmv1.DrainRunsRequest{Force: true})
		if again.summary.GetSelected() != 0 || audits.Load() != 2 {
			t.Errorf("a second drain = %v, audits %d", again.summary, audits.Load())
		}
	})
}

func TestDrainExpiredCarriesOutExpiredGatesOnlyWithForce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, _ := openExpiring(t, e, "expiring_abort", 2*time.Minute)
		dry := e.drainRuns(t, &realmv1.DrainRunsRequest{Expired: true})
		if len(dry.items) != 1 || dry.items[0].GetRunId() != run || dry.items[0].GetLine() != "gate expired 2m ago — would enact abort" {
			t.Fatalf("dry = %v", dry.items)
		}
		if s := state(t, e, run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING {
			t.Fatalf("the dry run changed the run: %v", s.GetRunPhase())
		}
		done := e.drainRuns(t, &realmv1.DrainRunsRequest{Expired: true, Force: true})
		if got := done.ids("done"); !slices.Equal(got, []string{run}) || !strings.HasPrefix(done.items[0].GetLine(), "gate enacted (abort)") {
			t.Fatalf("force = %v", done.items)
		}
		if s := state(t, e, run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
			t.Errorf("after the enactment: %v", s.GetRunPhase())
		}
		// Without --expired, drain leaves open runs alone.
		if b := e.drainRuns(t, &realmv1.DrainRunsRequest{Force: true}); len(b.ids("done")) != 0 {
			t.Errorf("plain drain acted on %v", b.items)
		}
	})
}

func TestDrainOneRunExpiredThenVoid(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, _ := openExpiring(t, e, "expiring_abort", 90*time.Second)
		plain, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("Run '%s' is not terminal (phase: 'gate_waiting') — nothing to drain. Its gate expired 1m ago. To see what the expiry will do: realm run drain %s --expired; add --force to carry it out.", run, run); plain.GetReply().GetContextHint() != want {
			t.Errorf("plain drain = %q", plain.GetReply().GetContextHint())
		}
		dry, _ := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Expired: true})
		if want := fmt.Sprintf("Run '%s': gate expired 1m ago — would enact abort on --force.", run); dry.GetReply().GetContextHint() != want {
			t.Errorf("dry --expired = %q", dry.GetReply().GetContextHint())
		}
		done, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Expired: true, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if h := done.GetReply().GetContextHint(); !strings.HasPrefix(h, "✓ gate enacted (abort).") || done.GetReply().GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
			t.Errorf("--expired --force = %q (%v)", h, done.GetReply().GetRunPhase())
		}

		var charges atomic.Int64
		startRunner(t, e, map[string]handlerFunc{"charge": okHandler(t, &charges)})
		e.register(t, []byte(withFinalizer))
		owing := start(t, e, "charged", nil).GetRunId()
		void := func(name string) *realmv1.Reply {
			resp, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: owing, Void: name})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply()
		}
		if r := void("nope"); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR || r.GetErrors()[0] != fmt.Sprintf("No finalizer ledger entry named 'nope' on run '%s'.", owing) {
			t.Errorf("void of an unknown finalizer = %v", r)
		}
		if r := void("audit"); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetContextHint() != "finalizer 'audit' voided by operator" {
			t.Errorf("void = %v", r)
		}
		if r := void("audit"); r.GetErrors()[0] != "Finalizer 'audit' is 'voided', not 'pending' — nothing to void." {
			t.Errorf("second void = %v", r)
		}
		if b := e.drainRuns(t, &realmv1.DrainRunsRequest{}); b.summary.GetSelected() != 0 {
			t.Errorf("a voided finalizer is still owed: %v", b.items)
		}
	})
}

func TestResumeForceOverridesAClaimOfUnknownAgeButNeverAHealthyOne(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		yaml := "id: once\nname: Once\nversion: 1\nsteps:\n  ask:\n    description: Ask.\n    execution: agent\n    validation_exhaustion: { threshold: 1 }\n    output_schema:\n      type: object\n      required: [ok]\n      properties:\n        ok: { type: boolean }\n"
		e.register(t, []byte(yaml))
		failedWith := func(deadline any) string {
			run := start(t, e, "once", nil).GetRunId()
			step(t, e, run, "ask", map[string]any{"ok": "no"})
			e.editDoc(t, run, func(d map[string]any) {
				d["claims"] = map[string]any{"ask": map[string]any{"token": "t0", "deadline": deadline}}
			})
			// A crash left the claim: a new version, so no cached copy of
			// the run is taken for the store's.
			if err := e.rc.HIncrBy(ctx(t), e.st.RunKey(run), "v", 1).Err(); err != nil {
				t.Fatal(err)
			}
			return run
		}
		resume := func(run string, force bool) *realmv1.Reply {
			resp, err := e.client.ResumeRun(ctx(t), &realmv1.ResumeRunRequest{RunId: run, FromStep: "ask", Force: force})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply()
		}
		unknown := failedWith(nil)
		r := resume(unknown, false)
		if r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR || r.GetErrors()[0] != "Step 'ask' has an unknown-age claim (no reliable deadline) — its liveness cannot be verified. Re-run with --force to override (only after confirming the runner is actually dead)." {
			t.Fatalf("resume without --force = %v", r)
		}
		if r := resume(unknown, true); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
			t.Errorf("resume --force = %v", r)
		}
		healthy := failedWith(e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
		if r := resume(healthy, true); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR || !strings.Contains(r.GetErrors()[0], "has a HEALTHY claim") {
			t.Errorf("resume --force over a healthy claim = %v", r)
		}
	})
}

func TestBatchActsRefuseABadRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	// A server stream's refusal arrives with its first Recv.
	for name, err := range map[string]error{
		"purge without an age": func() error {
			s, err := e.client.PurgeRuns(ctx(t), &realmv1.PurgeRunsRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}(),
		"purge page too large": func() error {
			s, err := e.client.PurgeRuns(ctx(t), &realmv1.PurgeRunsRequest{OlderThanSeconds: 60, PageSize: 5000})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}(),
		"drain negative page": func() error {
			s, err := e.client.DrainRuns(ctx(t), &realmv1.DrainRunsRequest{PageSize: -1})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}(),
	} {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

// Before --force, drain --expired says what the expiry would make of the
// guards, from a copy of the run it never writes.
func TestDrainExpiredSaysWhatTheGuardsWouldDo(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		run, _ := openExpiring(t, e, "expiring", 5*time.Minute)
		dry := e.drainRuns(t, &realmv1.DrainRunsRequest{Expired: true})
		if len(dry.items) != 1 || dry.items[0].GetLine() != "gate expired 5m ago — would enact settle_default 'hold'; guard 'only_if_shipping' would then abort the run (The order was held)" {
			t.Fatalf("dry = %v", dry.items)
		}
		one, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Expired: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("Run '%s': gate expired 5m ago — would enact settle_default 'hold'; guard 'only_if_shipping' would then abort the run (The order was held) on --force.", run); one.GetReply().GetContextHint() != want {
			t.Errorf("drain <run> --expired = %q", one.GetReply().GetContextHint())
		}
		if s := state(t, e, run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING || s.GetRunVersion() != 0 {
			t.Errorf("the outlook wrote the run: %v v%d", s.GetRunPhase(), s.GetRunVersion())
		}
	})
}
