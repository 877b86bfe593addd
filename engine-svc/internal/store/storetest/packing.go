package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// packedFixture creates a run with outputs and evidence (one entry not
// valid UTF-8) at version 1, packs it and returns it as it read before
// (its evidence in ranges by [start, stop]).
func packedFixture(t *testing.T, s store.Store) (id string, before *store.Snapshot, evidence [][]byte, packRanges map[[2]int64][][]byte) {
	t.Helper()
	id = s.NewRunID("")
	create(t, s, id, func(c *store.Change) {
		c.Outputs = map[string][]byte{"a": []byte(`{"n":1}`), "b": []byte(`"x"`), "empty": {}}
		c.Evidence = [][]byte{[]byte(`{"step_id":"a"}`), {0xff, 0xfe, 'b'}}
		c.Index = []store.IndexOp{{Index: store.IndexRuns, Member: id, Score: 1000}}
	})
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"id":"` + id + `","v":1}`),
		Outputs: map[string][]byte{"b": nil, "c": []byte(`3`)}, Evidence: [][]byte{[]byte(`{"step_id":"c"}`)},
		Index: []store.IndexOp{{Index: store.IndexPack, Member: id, Score: 1000}}}); err != nil {
		t.Fatal(err)
	}
	before = load(t, s, id)
	evidence, err := s.Evidence(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	// Every range as the unpacked list (LRANGE itself) gives it.
	packRanges = map[[2]int64][][]byte{}
	for _, r := range [][2]int64{{0, -1}, {1, 1}, {-2, -1}, {1, 0}, {5, 9}, {-9, 0}, {0, 99}, {-1, -2}, {2, -1}} {
		if packRanges[r], err = s.Evidence(ctx, id, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	packed, err := s.PackRun(ctx, id)
	if err != nil || !packed {
		t.Fatalf("PackRun = %v, %v; want true, nil", packed, err)
	}
	return id, before, evidence, packRanges
}

func sameSnapshot(t *testing.T, what string, got, want *store.Snapshot) {
	t.Helper()
	if got.Version != want.Version || !bytes.Equal(got.Doc, want.Doc) || got.EvidenceLen != want.EvidenceLen ||
		!maps.EqualFunc(got.Outputs, want.Outputs, bytes.Equal) {
		t.Fatalf("%s: v%d %s ev%d %q, want v%d %s ev%d %q", what, got.Version, got.Doc, got.EvidenceLen, got.Outputs,
			want.Version, want.Doc, want.EvidenceLen, want.Outputs)
	}
}

func sameEntries(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
	}
}

// A packed run reads as it did: LoadRun, LoadDocs and every range of
// Evidence, and it leaves the pack index.
func testPackedRunReadsAsBefore(t *testing.T, s store.Store) {
	id, before, _, packRanges := packedFixture(t, s)
	sameSnapshot(t, "load after pack", load(t, s, id), before)
	docs, err := s.LoadDocs(ctx, []string{id})
	if err != nil || len(docs) != 1 || docs[0] == nil || docs[0].Version != 1 || !bytes.Equal(docs[0].Doc, before.Doc) {
		t.Fatalf("LoadDocs = %+v, %v; want v1 %s", docs, err, before.Doc)
	}
	for r, want := range packRanges {
		got, err := s.Evidence(ctx, id, r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		sameEntries(t, fmt.Sprintf("evidence %v", r), got, want)
	}
	if due, err := s.Due(ctx, store.IndexPack, 1e15, 10); err != nil || len(due) != 0 {
		t.Fatalf("pack index after packing = %v, %v; want empty", due, err)
	}
	if packed, err := s.PackRun(ctx, id); err != nil || packed {
		t.Fatalf("second PackRun = %v, %v; want false, nil", packed, err)
	}
	sameSnapshot(t, "load after a second pack", load(t, s, id), before)
}

// A commit to a packed run lands on the run as it was (outputs set and
// deleted, evidence after the old), and a stale one is still refused.
func testCommitToPackedRun(t *testing.T, s store.Store) {
	id, before, evidence, _ := packedFixture(t, s)
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`)})
	if c := conflict(t, err); c.Version != 1 {
		t.Fatalf("stale commit to a packed run: %+v, want version 1", c)
	}
	sameSnapshot(t, "after a refused commit", load(t, s, id), before)
	// Unpacked to learn the commit was stale, it waits to be packed again.
	if due, err := s.Due(ctx, store.IndexPack, 1e15, 10); err != nil || len(due) != 1 || due[0] != id {
		t.Fatalf("pack index after a refused commit = %v, %v; want the run", due, err)
	}
	const cid = "0123456789abcdef0123456789abcdef"
	change := &store.Change{RunID: id, ExpectVersion: 1, NewVersion: 2, Doc: []byte(`{"v":2}`), CommitID: cid,
		Outputs: map[string][]byte{"a": nil, "d": []byte(`4`)}, Evidence: [][]byte{[]byte(`{"step_id":"d"}`)}}
	if err := s.CommitRun(ctx, change); err != nil {
		t.Fatal(err)
	}
	want := &store.Snapshot{Version: 2, Doc: change.Doc, EvidenceLen: before.EvidenceLen + 1, Outputs: maps.Clone(before.Outputs)}
	delete(want.Outputs, "a")
	want.Outputs["d"] = []byte(`4`)
	sameSnapshot(t, "after a commit to the packed run", load(t, s, id), want)
	got, err := s.Evidence(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "evidence after the commit", got, append(evidence, change.Evidence...))
	// Packed again, the same commit sent again is known as landed.
	if packed, err := s.PackRun(ctx, id); err != nil || !packed {
		t.Fatalf("PackRun after the commit = %v, %v", packed, err)
	}
	if err := s.CommitRun(ctx, change); err != nil {
		t.Fatalf("the landed commit sent again to the packed run: %v", err)
	}
	sameSnapshot(t, "after the repeat", load(t, s, id), want)
}

func testPackMissingOrDeleted(t *testing.T, s store.Store) {
	if _, err := s.PackRun(ctx, s.NewRunID("")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PackRun of a missing run: %v, want ErrNotFound", err)
	}
	id, _, _, _ := packedFixture(t, s)
	if err := s.DeleteRun(ctx, id, "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load of a deleted packed run: %v, want ErrNotFound", err)
	}
	if _, err := s.Evidence(ctx, id, 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("evidence of a deleted packed run: %v, want ErrNotFound", err)
	}
}
