package server_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// seen is what a client reads of one run: its state, export, inspection
// and its entry in the run list.
func seen(t *testing.T, e *env, run string) []proto.Message {
	t.Helper()
	exp, err := e.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := e.client.InspectRun(ctx(t), &realmv1.InspectRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "answer"})
	if err != nil {
		t.Fatal(err)
	}
	var entry *realmv1.RunSummary
	for _, r := range list.GetRuns() {
		if r.GetRunId() == run {
			entry = r
		}
	}
	if entry == nil {
		t.Fatalf("run %s is not listed", run)
	}
	// The export's own time is the only field that moves with the clock.
	var bundle map[string]any
	if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
		t.Fatal(err)
	}
	delete(bundle, "exported_at")
	exp.Bundle, _ = json.Marshal(bundle)
	return []proto.Message{state(t, e, run), exp, ins, entry}
}

func packed(t *testing.T, e *env, run string) bool {
	t.Helper()
	pk, err := e.rc.HExists(ctx(t), e.st.RunKey(run), "pk").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pk && exists(t, e, e.st.OutputsKey(run), e.st.EvidenceKey(run)) != 0 {
		t.Fatalf("run %s is packed but its outputs or evidence key is left", run)
	}
	return pk
}

// An ended run is packed by the sweep once it has rested DefaultPackAfter,
// and reads exactly as before through every call; an open run and one
// that ended since are left as written. A write to a packed run (gc
// --heal here) lands on it whole, and the run is packed again after.
func TestEndedRunsArePackedAndReadAsBefore(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		old := e.answered(t, "old", "")
		open := e.startKeyed(t, "open", "")
		before := seen(t, e, old)
		e.clock.Advance(2 * engine.DefaultPackAfter)
		recent := e.answered(t, "recent", "")

		// With packing off (--pack-after=0) the run waits in its index.
		off := engine.New(engine.Options{Store: e.st, Clock: e.clock.Now, PackAfter: engine.NoPacking})
		if n, err := off.SweepPack(ctx(t), 100); err != nil || n != 0 || packed(t, e, old) {
			t.Fatalf("SweepPack with packing off = %d, %v; want nothing packed", n, err)
		}
		n, err := e.eng.SweepPack(ctx(t), 100)
		if err != nil || n != 1 {
			t.Fatalf("SweepPack = %d, %v; want 1 run packed", n, err)
		}
		if !packed(t, e, old) || packed(t, e, open) || packed(t, e, recent) {
			t.Fatalf("packed: ended %v, open %v, just ended %v; want only the first", packed(t, e, old), packed(t, e, open), packed(t, e, recent))
		}
		after := seen(t, e, old)
		for i := range before {
			if !proto.Equal(before[i], after[i]) {
				t.Errorf("read %d changed by packing:\nbefore %v\nafter  %v", i, before[i], after[i])
			}
		}
		// Starting under the key of the packed run finds it.
		if r := e.startKeyed(t, "old", ""); r != old {
			t.Errorf("start under the packed run's key: %s, want %s", r, old)
		}
		if n, err := e.eng.SweepPack(ctx(t), 100); err != nil || n != 0 {
			t.Errorf("second SweepPack = %d, %v; want nothing left to pack", n, err)
		}

		// A packed run is out of the pack index as it should be: heal
		// finds nothing to mend.
		if dry := e.gc(t, &realmv1.GcRunsRequest{Heal: true}); len(dry.GetStale()) != 0 {
			t.Fatalf("heal finds stale runs after packing: %v", dry.GetStale())
		}
		// gc --heal rewrites a run it finds out of the run index: the
		// commit unpacks the packed run first.
		if err := e.rc.ZRem(ctx(t), e.st.IndexKey(e.st.BucketOf(old), "index"), old).Err(); err != nil {
			t.Fatal(err)
		}
		v0, _ := e.doc(t, old)
		if healed := e.gc(t, &realmv1.GcRunsRequest{Heal: true, Force: true}); healed.GetHealed() != 1 || healed.GetHealFailed() != 0 {
			t.Fatalf("heal = %v", healed)
		}
		if v1, _ := e.doc(t, old); v1 != v0+1 || packed(t, e, old) {
			t.Fatalf("healed run at version %d (was %d), packed %v; want one write and unpacked", v1, v0, packed(t, e, old))
		}
		exp, err := e.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: old})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bundleEvidence(t, exp), bundleEvidence(t, before[1].(*realmv1.ExportRunResponse)); got != want || want == 0 {
			t.Errorf("evidence after the heal: %d entries, want %d", got, want)
		}
		e.clock.Advance(2 * engine.DefaultPackAfter)
		if n, err := e.eng.SweepPack(ctx(t), 100); err != nil || n != 2 || !packed(t, e, old) {
			t.Errorf("SweepPack after the heal = %d, %v (packed %v); want the healed and the recent run", n, err, packed(t, e, old))
		}
	})
}

// bundleEvidence is how many evidence entries an export holds.
func bundleEvidence(t *testing.T, exp *realmv1.ExportRunResponse) int {
	t.Helper()
	var b struct {
		Run struct{ Evidence []json.RawMessage }
	}
	if err := json.Unmarshal(exp.GetBundle(), &b); err != nil {
		t.Fatal(err)
	}
	return len(b.Run.Evidence)
}
