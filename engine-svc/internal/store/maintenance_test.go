package store_test

import (
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// A reap checks, in its script, that the run is still gone: a run that
// exists (again, or all along) keeps its keys, and a key pointer that
// moved to another run is left alone.
func TestReapNeverTouchesALiveRunOrAMovedKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{})
		key := "wf\x1fk"
		live := s.NewRunID(key)
		if err := s.CommitRun(ctx, &store.Change{RunID: live, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
			Outputs: map[string][]byte{"a": []byte(`1`)}, IdemKey: key}); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.ReapResidue(ctx, store.Residue{Kind: store.ResidueOutputs, RunID: live, Key: s.OutputsKey(live)}); ok || err != nil {
			t.Errorf("reaped a live run's outputs: %v %v", ok, err)
		}
		gone := s.NewRunID(key) // same bucket, never stored
		if ok, err := s.ReapResidue(ctx, store.Residue{Kind: store.ResidueKey, RunID: gone, Key: s.IdemKeyName(key)}); ok || err != nil {
			t.Errorf("reaped a key naming another run: %v %v", ok, err)
		}
		if n, _ := c.Exists(ctx, s.OutputsKey(live), s.IdemKeyName(key)).Result(); n != 2 {
			t.Fatalf("%d of 2 keys left", n)
		}
		if found, err := s.FindResidue(ctx); err != nil || len(found) != 0 {
			t.Errorf("residue on a clean store: %v %v", found, err)
		}
	})
}

// PointKey and RewriteWorkflowVersion write only over what the caller read.
func TestPointKeyAndWorkflowRewriteAreCompareAndSet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := newChecked(t, b, store.Options{})
		key := "wf\x1fk"
		a, b2 := s.NewRunID(key), s.NewRunID(key)
		if ok, err := s.PointKey(ctx, key, a, ""); !ok || err != nil {
			t.Fatalf("point a free key: %v %v", ok, err)
		}
		if ok, _ := s.PointKey(ctx, key, b2, ""); ok {
			t.Error("pointed a key that had moved")
		}
		if held, _ := s.LookupKey(ctx, key); held != a {
			t.Errorf("key holds %s, want %s", held, a)
		}
		rec, err := s.PutWorkflow(ctx, "wf", []byte(`{"id":"wf"}`))
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.RewriteWorkflowVersion(ctx, "wf", rec.Version, []byte(`{"id":"other"}`), []byte(`{}`)); ok {
			t.Error("rewrote a version that did not read as expected")
		}
		if ok, err := s.RewriteWorkflowVersion(ctx, "wf", rec.Version, rec.Definition, []byte(`{"id":"wf","origin":"human"}`)); !ok || err != nil {
			t.Fatalf("rewrite: %v %v", ok, err)
		}
		got, _ := s.GetWorkflow(ctx, "wf")
		if string(got.Definition) != `{"id":"wf","origin":"human"}` || got.Version != rec.Version {
			t.Errorf("stored %s v%d", got.Definition, got.Version)
		}
	})
}
