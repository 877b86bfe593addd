package embedded_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// The store's commit script runs natively (no Lua) and is journaled as the
// transaction of its writes: a commit's record holds its document, not the
// script's body, and a refused commit (a stale version) writes no record.
// Reopening replays it (TestReopenRestoresEverything covers what it wrote).
func TestACommitIsJournaledAsItsWritesNotTheScript(t *testing.T) {
	dir := t.TempDir()
	_, c := open(t, dir)
	s := store.NewRedis(c, store.Options{Buckets: 8})
	journal := func() []byte {
		t.Helper()
		paths, _ := filepath.Glob(filepath.Join(dir, "store.journal.*"))
		var all []byte
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	id := s.NewRunID("")
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"marker":"first"}`),
		Index: []store.IndexOp{{Index: "index", Member: id, Score: 1}}}); err != nil {
		t.Fatal(err)
	}
	j := journal()
	if !bytes.Contains(j, []byte(`{"marker":"first"}`)) || !bytes.Contains(j, []byte("MULTI")) {
		t.Fatalf("the commit is not journaled as a transaction of its writes: %q", j)
	}
	if bytes.Contains(j, []byte("redis.call")) {
		t.Fatalf("the journal holds the commit script's body")
	}
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 5, NewVersion: 6, Doc: []byte(`{"marker":"stale"}`)})
	if !store.IsConflict(err) {
		t.Fatalf("a stale commit: %v, want a conflict", err)
	}
	if after := journal(); !bytes.Equal(after, j) {
		t.Fatalf("a refused commit wrote %d journal bytes", len(after)-len(j))
	}

	// A write the script makes on a key of the wrong type fails the
	// commit, as it fails the script on Redis.
	bad := s.NewRunID("")
	if err := c.Set(ctx, s.RunKey(bad)+":out", "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = s.CommitRun(ctx, &store.Change{RunID: bad, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
		Outputs: map[string][]byte{"a": []byte(`1`)}})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("a commit over a key of the wrong type: %v, want WRONGTYPE", err)
	}
}
