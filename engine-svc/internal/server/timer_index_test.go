package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A commit sends a timer index removal only where the record it replaces
// had the run in that index, so the indexes must still hold what each
// stored record derives after every kind of write: a question opened and
// expired, a claim taken and released, a run ended owing its finalizer and
// cleaned up; and a run an index lost is back in it after its next write.
// gc --heal's dry run compares every run's index membership with its
// record.
func TestTimerIndexesMatchTheRecordAfterEveryWrite(t *testing.T) {
	t.Parallel()
	const timed = "id: timed\nname: Timed\nversion: 1\nsteps:\n" +
		"  approve:\n    description: Approve.\n    execution: auto\n    trust: human_confirmed\n    gate:\n      choices: [ship, hold]\n      timeout_seconds: 60\n      on_expiry: settle_default\n      default_choice: hold\n"
	eachBackend(t, func(t *testing.T, e *env) {
		var runs []string
		// consistent checks membership (gc --heal) and, for every open
		// run, that its activity score is its record's updated_at.
		consistent := func(when string) {
			t.Helper()
			if stale := e.gc(t, &realmv1.GcRunsRequest{Heal: true}).GetStale(); len(stale) != 0 {
				t.Fatalf("%s: stale runs %v", when, stale)
			}
			for _, id := range runs {
				r := loadDoc(t, e, id)
				if r.Terminal() {
					continue
				}
				got, err := e.rc.ZScore(ctx(t), e.st.IndexKey(e.st.BucketOf(id), store.IndexActivity), id).Result()
				if want := float64(record.ParseTime(r.UpdatedAt).UnixMilli()); err != nil || got != want {
					t.Fatalf("%s: run %s activity score %v (%v), want its updated_at %v", when, id, got, err, want)
				}
			}
		}
		entered, release := make(chan struct{}, 1), make(chan struct{})
		var audits atomic.Int64
		startRunner(t, e, map[string]handlerFunc{
			"charge": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"ok": true})}, nil
			},
			"audit": okHandler(t, &audits),
		})
		e.register(t, []byte(timed))
		e.register(t, []byte(answerWorkflow))
		e.register(t, []byte(strings.Replace(string(tenSteps()), "id: bench", "id: two", 1)))
		e.register(t, []byte(withFinalizer))

		gated := start(t, e, "timed", nil).GetRunId()
		open := start(t, e, "two", nil).GetRunId()
		runs = append(runs, gated, open, e.startKeyed(t, "open", ""), e.answered(t, "done", ""))
		// A refused answer writes the run (it counts the refusal) and
		// changes nothing but its activity; so does an accepted one that
		// leaves the run open.
		e.clock.Advance(time.Second)
		if r := step(t, e, open, "s1", map[string]any{"note": "no n"}); r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("an answer without n was accepted: %v", r)
		}
		consistent("an answer refused")
		// An index that lost the run (as one an older engine never wrote)
		// has it again after the run's next write.
		if err := e.rc.ZRem(ctx(t), e.st.IndexKey(e.st.BucketOf(open), store.IndexActivity), open).Err(); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		if r := step(t, e, open, "s1", map[string]any{"n": 1}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("s1: %v", r)
		}
		consistent("a question open, a run open, a run done")

		started := make(chan *realmv1.Reply, 1)
		go func() {
			resp, err := e.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "charged"})
			if err != nil {
				t.Error(err)
			}
			started <- resp.GetReply()
		}()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler was never called")
		}
		consistent("a handler in flight under its claim")
		close(release)
		if r := <-started; r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("charged run: %v", r)
		}
		consistent("a run ended and cleaned up")

		e.clock.Advance(61 * time.Second)
		resp, err := e.client.AdvanceRun(ctx(t), &realmv1.AdvanceRunRequest{RunId: gated, Caller: attendant, ExpiryTimer: true})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetReply().GetExpiryEnactedVia() != "timer" {
			t.Fatalf("the expiry was not enacted: %v", resp.GetReply())
		}
		consistent("a question expired and settled")
	})
}
