package embedded_test

import (
	"bytes"
	"maps"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// A packed run (one binary field) comes back whole from the journal and
// from the base an open writes after replaying it, and takes commits.
func TestAPackedRunSurvivesReplayAndTheBase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, c := open(t, dir)
	s := store.NewRedis(c, store.Options{Buckets: 8})
	id := s.NewRunID("")
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"a":1}`),
		Outputs:  map[string][]byte{"fetch": []byte(`{"ok":true}`)},
		Evidence: [][]byte{[]byte(`e0`), {0xff, 0x00, 'b', 'i', 'n'}}}); err != nil {
		t.Fatal(err)
	}
	want, err := s.LoadRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.PackRun(ctx, id); err != nil || !ok {
		t.Fatalf("PackRun = %v, %v", ok, err)
	}
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The first reopen replays the journal (and writes a base); the
	// second reads that base.
	for _, from := range []string{"journal", "base"} {
		srv, c = open(t, dir)
		s = store.NewRedis(c, store.Options{Buckets: 8})
		got, err := s.LoadRun(ctx, id)
		if err != nil {
			t.Fatalf("from the %s: %v", from, err)
		}
		if got.Version != want.Version || !bytes.Equal(got.Doc, want.Doc) || got.EvidenceLen != want.EvidenceLen ||
			!maps.EqualFunc(got.Outputs, want.Outputs, bytes.Equal) {
			t.Fatalf("from the %s: %+v, want %+v", from, got, want)
		}
		if pk, _ := c.HExists(ctx, s.RunKey(id), store.PackedField).Result(); !pk {
			t.Fatalf("from the %s: the run is no longer packed", from)
		}
		_ = c.Close()
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, c = open(t, dir)
	s = store.NewRedis(c, store.Options{Buckets: 8})
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"a":2}`),
		Evidence: [][]byte{[]byte(`e2`)}}); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Evidence(ctx, id, 0, -1)
	if err != nil || len(ev) != 3 || !bytes.Equal(ev[1], []byte{0xff, 0x00, 'b', 'i', 'n'}) {
		t.Fatalf("evidence after a commit to the reopened packed run: %q, %v", ev, err)
	}
}
