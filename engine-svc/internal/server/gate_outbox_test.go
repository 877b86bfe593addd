package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// outboxAgrees reads a run and its bucket's gate outbox (store.IndexOpenGates)
// in one MULTI on their shared slot, and fails unless the outbox holds the
// run exactly while the run has an open gate, scored by its opened_at:
// the write that opens or ends a gate moves both, or neither.
func outboxAgrees(t *testing.T, e *env, run string, wantOpen bool) {
	t.Helper()
	var doc *redis.StringCmd
	var score *redis.FloatCmd
	_, err := e.rc.TxPipelined(ctx(t), func(p redis.Pipeliner) error {
		doc = p.HGet(ctx(t), e.st.RunKey(run), "doc")
		score = p.ZScore(ctx(t), e.st.IndexKey(e.st.BucketOf(run), store.IndexOpenGates), run)
		return nil
	})
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	var r record.Run
	err = json.Unmarshal([]byte(doc.Val()), &r)
	if err != nil {
		t.Fatal(err)
	}
	open := r.PendingGate != nil && !r.Terminal()
	inOutbox := score.Err() == nil
	if open != wantOpen || inOutbox != wantOpen {
		t.Fatalf("gate open %v, in outbox %v, want both %v", open, inOutbox, wantOpen)
	}
	if open && int64(score.Val()) != record.ParseTime(r.PendingGate.OpenedAt).UnixMilli() {
		t.Errorf("outbox score %v, gate opened at %s", score.Val(), r.PendingGate.OpenedAt)
	}
}

func TestGateOutboxMovesInTheWriteThatOpensOrEndsTheGate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/support.yaml")); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "support", nil).GetRunId()
		outboxAgrees(t, e, run, false)
		g := step(t, e, run, "draft", map[string]any{"reply": "We have refunded the charge."}).GetGate()
		outboxAgrees(t, e, run, true)
		if r := respond(t, e, run, g.GetGateId(), "send", nil); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("answer = %v", r)
		}
		outboxAgrees(t, e, run, false)

		// An expiry that aborts the run ends the gate in the same write.
		expired, gate := openExpiring(t, e, "expiring_abort", time.Minute)
		outboxAgrees(t, e, expired, true)
		respond(t, e, expired, gate, "ship", nil)
		outboxAgrees(t, e, expired, false)
	})
}

// A gate opened before the outbox existed is missing from it; `realm run gc
// --heal` finds and puts it there, so notify-svc learns of it too.
func TestHealPutsAGateOpenedBeforeTheOutboxInIt(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.register(t, readFile(t, "testdata/support.yaml")); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		run := start(t, e, "support", nil).GetRunId()
		step(t, e, run, "draft", map[string]any{"reply": "We have refunded the charge."})
		if err := e.rc.ZRem(ctx(t), e.st.IndexKey(e.st.BucketOf(run), store.IndexOpenGates), run).Err(); err != nil {
			t.Fatal(err)
		}
		healed := e.gc(t, &realmv1.GcRunsRequest{Heal: true, Force: true})
		if healed.GetHealed() != 1 {
			t.Fatalf("heal = %v", healed)
		}
		outboxAgrees(t, e, run, true)
	})
}
