// Package storetest is the conformance suite every store.Store must pass
// (River-style: the store package runs it against real Redis and against
// the embedded miniredis), plus helpers for tests and benchmarks that need
// a real Redis.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// Exercise runs the conformance suite. newStore must return an empty store
// of its own (a fresh key prefix), cleaned up by the test.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"CreateThenLoadReturnsEverythingWritten", testCreateThenLoad},
		{"LoadOfMissingRunIsNotFound", testLoadMissing},
		{"LoadDocsReadsEachDocumentNilWhereAbsent", testLoadDocs},
		{"CreateOfExistingRunIsRefused", testCreateExisting},
		{"CommitAtStoredVersionWinsAndStaleIsRefused", testCAS},
		{"CommitOnMissingRunReportsMinusOne", testCommitMissing},
		{"FiftyRacersOnOneVersionExactlyOneWins", testRace},
		{"IdempotencyKeyIsCreateIfAbsent", testIdemCreate},
		{"TwentyCreatorsRacingOneKeyExactlyOneWins", testIdemRace},
		{"IdempotencyKeyMovesByCompareAndSet", testIdemMove},
		{"OutputsAreSetAndDeleted", testOutputs},
		{"EvidenceAppendsInOrderAndReadsRanges", testEvidence},
		{"ListIsNewestFirstAndCursorWalksAllBuckets", testList},
		{"ListFindsAPageCrowdedIntoOneBucket", testListCrowded},
		{"ListRefusesMalformedCursor", testListBadCursor},
		{"DeleteRemovesRunEvidenceAndIndexEntry", testDelete},
		{"WorkflowVersionsAreStoredAndRead", testWorkflows},
		{"OnlyTheNewestWorkflowVersionsAreKept", testWorkflowPrune},
		{"MalformedChangesAreRefusedNotConflicts", testInvalid},
		{"DueReturnsMembersAtOrBelowTheTimeAcrossBuckets", testDue},
		{"ACommitSentTwiceAppliesOnce", testRepeatedCommit},
		{"DeleteAtAVersionLeavesAMovedRunWhole", testDeleteAtVersion},
		{"APackedRunReadsAsBefore", testPackedRunReadsAsBefore},
		{"ACommitToAPackedRunLandsOnItWhole", testCommitToPackedRun},
		{"PackOfAMissingRunIsNotFoundAndAPackedRunDeletes", testPackMissingOrDeleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			tc.run(t, s)
		})
	}
}

var ctx = context.Background()

// create writes a new run at version 0 or fails the test.
func create(t *testing.T, s store.Store, id string, mods ...func(*store.Change)) {
	t.Helper()
	c := &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"id":"` + id + `"}`)}
	for _, m := range mods {
		m(c)
	}
	if err := s.CommitRun(ctx, c); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

func load(t *testing.T, s store.Store, id string) *store.Snapshot {
	t.Helper()
	snap, err := s.LoadRun(ctx, id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return snap
}

func conflict(t *testing.T, err error) *store.ConflictError {
	t.Helper()
	var c *store.ConflictError
	if !errors.As(err, &c) {
		t.Fatalf("got %v, want *store.ConflictError", err)
	}
	if !store.IsConflict(err) {
		t.Fatalf("IsConflict(%v) = false", err)
	}
	return c
}

func testCreateThenLoad(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id, func(c *store.Change) {
		c.Outputs = map[string][]byte{"fetch": []byte(`{"n":1}`)}
		c.Evidence = [][]byte{[]byte(`{"kind":"created"}`)}
		c.Index = []store.IndexOp{{Index: "index", Member: id, Score: 1000}}
	})
	snap := load(t, s, id)
	if snap.Version != 0 || string(snap.Doc) != `{"id":"`+id+`"}` || snap.EvidenceLen != 1 {
		t.Fatalf("snapshot = v%d %s ev%d, want v0 the created doc ev1", snap.Version, snap.Doc, snap.EvidenceLen)
	}
	if got := string(snap.Outputs["fetch"]); got != `{"n":1}` || len(snap.Outputs) != 1 {
		t.Fatalf("outputs = %v, want fetch only", snap.Outputs)
	}
}

func testLoadDocs(t *testing.T, s store.Store) {
	// Runs in different buckets, one with outputs and evidence, one never
	// created, one written twice.
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = s.NewRunID("")
		if i == 7 {
			continue
		}
		create(t, s, ids[i], func(c *store.Change) {
			if i == 3 {
				c.Outputs = map[string][]byte{"fetch": []byte(`{"n":3}`)}
				c.Evidence = [][]byte{[]byte(`{"kind":"created"}`)}
			}
		})
	}
	if err := s.CommitRun(ctx, &store.Change{RunID: ids[5], ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	docs, err := s.LoadDocs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(ids) {
		t.Fatalf("%d documents for %d ids", len(docs), len(ids))
	}
	for i, id := range ids {
		if i == 7 {
			if docs[i] != nil {
				t.Errorf("the absent run read as %+v", docs[i])
			}
			continue
		}
		want, got := load(t, s, id), docs[i]
		if got == nil || got.Version != want.Version || !bytes.Equal(got.Doc, want.Doc) {
			t.Errorf("run %d: LoadDocs %+v, LoadRun v%d %s", i, got, want.Version, want.Doc)
		}
	}
	if docs[5].Version != 1 || string(docs[5].Doc) != `{"v":1}` {
		t.Errorf("the rewritten run read as %+v", docs[5])
	}
	if _, err := s.LoadDocs(ctx, []string{ids[0], "a:b"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a malformed id: %v, want ErrInvalid", err)
	}
}

func testLoadMissing(t *testing.T, s store.Store) {
	if _, err := s.LoadRun(ctx, s.NewRunID("")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load of missing run: %v, want ErrNotFound", err)
	}
}

func testCreateExisting(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id)
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"second":true}`)})
	if c := conflict(t, err); c.Version != 0 || c.OnKey {
		t.Fatalf("conflict = %+v, want version 0 not on key", c)
	}
	if snap := load(t, s, id); bytes.Contains(snap.Doc, []byte("second")) {
		t.Fatalf("refused create overwrote the doc: %s", snap.Doc)
	}
}

func testCAS(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id)
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`"v1"`)}); err != nil {
		t.Fatalf("commit at stored version: %v", err)
	}
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`"stale"`),
		Evidence: [][]byte{[]byte("stale")}})
	if c := conflict(t, err); c.Version != 1 {
		t.Fatalf("stale commit reported version %d, want the stored 1", c.Version)
	}
	snap := load(t, s, id)
	if snap.Version != 1 || string(snap.Doc) != `"v1"` || snap.EvidenceLen != 0 {
		t.Fatalf("after stale commit: v%d %s ev%d, want v1 \"v1\" ev0", snap.Version, snap.Doc, snap.EvidenceLen)
	}
}

func testCommitMissing(t *testing.T, s store.Store) {
	err := s.CommitRun(ctx, &store.Change{RunID: s.NewRunID(""), ExpectVersion: 3, NewVersion: 4, Doc: []byte(`{}`)})
	if c := conflict(t, err); c.Version != -1 {
		t.Fatalf("commit on missing run reported version %d, want -1", c.Version)
	}
}

func testRace(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id)
	const racers = 50
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.CommitRun(ctx, &store.Change{
				RunID: id, ExpectVersion: 0, NewVersion: 1,
				Doc:      []byte(fmt.Sprintf(`{"winner":%d}`, i)),
				Evidence: [][]byte{[]byte(fmt.Sprintf(`{"racer":%d}`, i))},
			})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner != -1 {
				t.Fatalf("racers %d and %d both won", winner, i)
			}
			winner = i
			continue
		}
		if c := conflict(t, err); c.Version != 1 {
			t.Fatalf("loser %d saw version %d, want 1", i, c.Version)
		}
	}
	if winner == -1 {
		t.Fatal("no racer won")
	}
	snap := load(t, s, id)
	if snap.Version != 1 || string(snap.Doc) != fmt.Sprintf(`{"winner":%d}`, winner) {
		t.Fatalf("stored v%d %s, want v1 the winner's (%d) doc", snap.Version, snap.Doc, winner)
	}
	ev, err := s.Evidence(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || string(ev[0]) != fmt.Sprintf(`{"racer":%d}`, winner) {
		t.Fatalf("evidence = %q, want exactly the winner's entry", ev)
	}
}

func testIdemCreate(t *testing.T, s store.Store) {
	key := "wf-a\x00order-17"
	if got, err := s.LookupKey(ctx, key); err != nil || got != "" {
		t.Fatalf("lookup of unused key = %q, %v; want \"\"", got, err)
	}
	first := s.NewRunID(key)
	create(t, s, first, func(c *store.Change) { c.IdemKey = key })
	if got, err := s.LookupKey(ctx, key); err != nil || got != first {
		t.Fatalf("lookup = %q, %v; want %s", got, err, first)
	}
	second := s.NewRunID(key)
	err := s.CommitRun(ctx, &store.Change{RunID: second, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`), IdemKey: key})
	c := conflict(t, err)
	if !c.OnKey || c.KeyHolder != first || c.Version != -1 {
		t.Fatalf("conflict = %+v, want on key, held by %s, version -1", c, first)
	}
	if _, err := s.LoadRun(ctx, second); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused create left the run behind: %v", err)
	}
}

func testIdemRace(t *testing.T, s store.Store) {
	key := "wf-b\x00same-key"
	const creators = 20
	ids := make([]string, creators)
	errs := make([]error, creators)
	for i := range ids {
		ids[i] = s.NewRunID(key)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.CommitRun(ctx, &store.Change{RunID: ids[i], ExpectVersion: -1, NewVersion: 0,
				Doc: []byte(`{}`), IdemKey: key})
		}()
	}
	close(start)
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("two creators won: %s and %s", winner, ids[i])
			}
			winner = ids[i]
		}
	}
	if winner == "" {
		t.Fatal("no creator won")
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		if c := conflict(t, err); !c.OnKey || c.KeyHolder != winner {
			t.Fatalf("loser %d: %+v, want on key held by %s", i, c, winner)
		}
		if _, err := s.LoadRun(ctx, ids[i]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("loser %s exists: %v", ids[i], err)
		}
	}
	if got, _ := s.LookupKey(ctx, key); got != winner {
		t.Fatalf("key points at %q, want winner %s", got, winner)
	}
}

func testIdemMove(t *testing.T, s store.Store) {
	key := "wf-c\x00rerun-me"
	old := s.NewRunID(key)
	create(t, s, old, func(c *store.Change) { c.IdemKey = key })
	rerun := s.NewRunID(key)
	create(t, s, rerun, func(c *store.Change) { c.IdemKey, c.IdemExpect = key, old })
	if got, _ := s.LookupKey(ctx, key); got != rerun {
		t.Fatalf("key points at %q after the move, want %s", got, rerun)
	}
	late := s.NewRunID(key)
	err := s.CommitRun(ctx, &store.Change{RunID: late, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
		IdemKey: key, IdemExpect: old})
	if c := conflict(t, err); !c.OnKey || c.KeyHolder != rerun {
		t.Fatalf("stale move: %+v, want on key held by %s", c, rerun)
	}
	// The old run is untouched by the move.
	if snap := load(t, s, old); snap.Version != 0 {
		t.Fatalf("old run at v%d, want 0", snap.Version)
	}
}

func testOutputs(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id, func(c *store.Change) {
		c.Outputs = map[string][]byte{"a": []byte(`1`), "b": []byte(`2`)}
	})
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`),
		Outputs: map[string][]byte{"a": nil, "b": []byte(`22`), "c": []byte(`3`), "empty": {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := load(t, s, id).Outputs
	want := map[string]string{"b": "22", "c": "3", "empty": ""}
	if len(got) != len(want) {
		t.Fatalf("outputs = %q, want %q", got, want)
	}
	for k, v := range want {
		if o, ok := got[k]; !ok || string(o) != v {
			t.Fatalf("outputs = %q, want %q", got, want)
		}
	}
}

func testEvidence(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	// One entry is not valid UTF-8: the store must keep bytes, not text.
	entries := [][]byte{[]byte(`e0`), []byte(`e1`), {0xff, 0xfe, 'e', '2'}}
	create(t, s, id, func(c *store.Change) { c.Evidence = entries })
	more := [][]byte{[]byte(`e3`), []byte(`e4`)}
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`), Evidence: more}); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(entries), more...)
	tests := []struct {
		name        string
		start, stop int64
		want        [][]byte
	}{
		{"all", 0, -1, all},
		{"middle", 1, 2, all[1:3]},
		{"last two", -2, -1, all[3:]},
		{"past the end", 7, 9, nil},
	}
	for _, tc := range tests {
		got, err := s.Evidence(ctx, id, tc.start, tc.stop)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		for i := range got {
			if !bytes.Equal(got[i], tc.want[i]) {
				t.Fatalf("%s: got %q, want %q", tc.name, got, tc.want)
			}
		}
	}
	if n := load(t, s, id).EvidenceLen; n != 5 {
		t.Fatalf("evidence length %d, want 5", n)
	}
	if _, err := s.Evidence(ctx, s.NewRunID(""), 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("evidence of missing run: %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, s store.Store) {
	testListing(t, s, 25, 4, func(int) string { return "" })
}

// Most runs in one bucket (the bucket of one key) and a few spread: a page
// must come whole although one bucket holds nearly all of it.
func testListCrowded(t *testing.T, s store.Store) {
	testListing(t, s, 60, 10, func(i int) string {
		if i%6 == 0 {
			return ""
		}
		return "one bucket"
	})
}

// testListing creates n runs (the last five in one millisecond, so ties
// must page correctly), each in the bucket of keyOf(i), and pages through
// them limit at a time.
func testListing(t *testing.T, s store.Store, n, limit int, keyOf func(int) string) {
	type entry struct {
		id    string
		score float64
	}
	var want []entry
	for i := range n {
		score := float64(1_000 + i)
		if i >= n-5 {
			score = 5_000
		}
		id := s.NewRunID(keyOf(i))
		create(t, s, id, func(c *store.Change) {
			c.Index = []store.IndexOp{{Index: "index", Member: id, Score: score}}
		})
		want = append(want, entry{id, score})
	}
	slices.SortFunc(want, func(a, b entry) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return -bytes.Compare([]byte(a.id), []byte(b.id))
	})
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n/limit+2 {
			t.Fatal("cursor never ends")
		}
		page, err := s.ListRuns(ctx, store.ListFilter{Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.RunIDs) > limit || page.Next != "" && len(page.RunIDs) != limit {
			t.Fatalf("page of %d, limit %d (next %q)", len(page.RunIDs), limit, page.Next)
		}
		got = append(got, page.RunIDs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d runs, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i].id {
			t.Fatalf("position %d: %s, want %s (newest first)", i, got[i], want[i].id)
		}
	}
}

func testListBadCursor(t *testing.T, s store.Store) {
	if _, err := s.ListRuns(ctx, store.ListFilter{Cursor: "%%% not a cursor"}); err == nil {
		t.Fatal("malformed cursor accepted")
	}
}

func testDelete(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	keep := s.NewRunID("")
	for _, r := range []string{id, keep} {
		create(t, s, r, func(c *store.Change) {
			c.Outputs = map[string][]byte{"a": []byte(`1`)}
			c.Evidence = [][]byte{[]byte(`e`)}
			c.Index = []store.IndexOp{{Index: "index", Member: c.RunID, Score: 10}}
		})
	}
	if err := s.DeleteRun(ctx, id, "", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("load after delete: %v", err)
	}
	if _, err := s.Evidence(ctx, id, 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("evidence after delete: %v", err)
	}
	page, err := s.ListRuns(ctx, store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(page.RunIDs, []string{keep}) {
		t.Fatalf("listed %v after delete, want only %s", page.RunIDs, keep)
	}
	if err := s.DeleteRun(ctx, id, "", -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	// A recreated run starts clean: no leftover outputs or evidence.
	create(t, s, id)
	if snap := load(t, s, id); len(snap.Outputs) != 0 || snap.EvidenceLen != 0 {
		t.Fatalf("recreated run has outputs %v, evidence %d", snap.Outputs, snap.EvidenceLen)
	}
}

func testWorkflows(t *testing.T, s store.Store) {
	if _, err := s.GetWorkflow(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get missing workflow: %v", err)
	}
	for i, def := range []string{`{"v":1}`, `{"v":2}`} {
		rec, err := s.PutWorkflow(ctx, "deploy", []byte(def))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Version != int64(i+1) || string(rec.Definition) != def || rec.RegisteredAt.IsZero() {
			t.Fatalf("put %d = %+v", i, rec)
		}
	}
	if _, err := s.PutWorkflow(ctx, "build", []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	latest, err := s.GetWorkflow(ctx, "deploy")
	if err != nil || latest.Version != 2 || string(latest.Definition) != `{"v":2}` {
		t.Fatalf("latest = %+v, %v; want v2", latest, err)
	}
	first, err := s.GetWorkflowVersion(ctx, "deploy", 1)
	if err != nil || string(first.Definition) != `{"v":1}` || first.RegisteredAt.IsZero() {
		t.Fatalf("v1 = %+v, %v; want the first definition", first, err)
	}
	if _, err := s.GetWorkflowVersion(ctx, "deploy", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("v3: %v, want ErrNotFound", err)
	}
	all, err := s.ListWorkflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != "build" || all[1].ID != "deploy" || all[1].Version != 2 {
		t.Fatalf("list = %+v, want build v1, deploy v2", all)
	}
}

// testWorkflowPrune stores five versions past the default limit: the five
// oldest are gone (not found, as a version never stored), the rest and the
// latest read as written.
func testWorkflowPrune(t *testing.T, s store.Store) {
	const keep = store.DefaultKeepWorkflowVersions
	for i := 1; i <= keep+5; i++ {
		if _, err := s.PutWorkflow(ctx, "deploy", []byte(fmt.Sprintf(`{"v":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	for v := int64(1); v <= keep+5; v++ {
		rec, err := s.GetWorkflowVersion(ctx, "deploy", v)
		if v <= 5 {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("v%d: %+v, %v; want ErrNotFound (pruned)", v, rec, err)
			}
			continue
		}
		if err != nil || string(rec.Definition) != fmt.Sprintf(`{"v":%d}`, v) {
			t.Errorf("v%d = %+v, %v; want it kept", v, rec, err)
		}
	}
	latest, err := s.GetWorkflow(ctx, "deploy")
	if err != nil || latest.Version != keep+5 {
		t.Fatalf("latest = %+v, %v; want v%d", latest, err, keep+5)
	}
	if all, err := s.ListWorkflows(ctx); err != nil || len(all) != 1 || all[0].Version != keep+5 {
		t.Fatalf("list = %+v, %v; want deploy v%d", all, err, keep+5)
	}
}

func testInvalid(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	tests := []struct {
		name string
		c    *store.Change
	}{
		{"nil change", nil},
		{"empty run id", &store.Change{ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}},
		{"colon in run id", &store.Change{RunID: "a:out", ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}},
		{"version does not rise", &store.Change{RunID: id, ExpectVersion: 3, NewVersion: 3, Doc: []byte(`{}`)}},
		{"nil doc", &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0}},
		{"bad index name", &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
			Index: []store.IndexOp{{Index: "", Member: id}}}},
	}
	for _, tc := range tests {
		err := s.CommitRun(ctx, tc.c)
		if err == nil || store.IsConflict(err) {
			t.Fatalf("%s: %v, want a non-conflict error", tc.name, err)
		}
	}
	if _, err := s.LoadRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused change wrote the run: %v", err)
	}
}

func testDue(t *testing.T, s store.Store) {
	var ids []string
	for i, at := range []float64{100, 200, 300} {
		id := s.NewRunID("")
		ids = append(ids, id)
		create(t, s, id, func(c *store.Change) {
			c.Index = []store.IndexOp{{Index: "expiries", Member: c.RunID, Score: at}}
		})
		_ = i
	}
	due, err := s.Due(ctx, "expiries", 200, 10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(due)
	want := slices.Clone(ids[:2])
	slices.Sort(want)
	if !slices.Equal(due, want) {
		t.Fatalf("due at 200 = %v, want %v", due, want)
	}
	if due, _ := s.Due(ctx, "expiries", 50, 10); len(due) != 0 {
		t.Fatalf("due at 50 = %v, want none", due)
	}
	if due, _ := s.Due(ctx, "expiries", 1000, 1); len(due) != 1 {
		t.Fatalf("limit 1 returned %v", due)
	}
	// A deleted run leaves the timers too.
	if err := s.DeleteRun(ctx, ids[0], "", -1); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.Due(ctx, "expiries", 1000, 10); slices.Contains(due, ids[0]) {
		t.Fatalf("deleted run still due: %v", due)
	}
}

// testRepeatedCommit sends commits twice, as a client does when a reply is
// lost: the repeat answers as the first did and writes nothing again.
func testRepeatedCommit(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	const key = "repeat-key"
	keyed := s.NewRunID(key)
	created := &store.Change{RunID: keyed, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"v":0}`),
		Evidence: [][]byte{[]byte(`"created"`)}, IdemKey: key, CommitID: strings.Repeat("a", 32)}
	for range 2 {
		if err := s.CommitRun(ctx, created); err != nil {
			t.Fatalf("create (repeat is fine): %v", err)
		}
	}
	if snap := load(t, s, keyed); snap.Version != 0 || snap.EvidenceLen != 1 {
		t.Fatalf("after a repeated create: version %d, %d evidence entries; want 0, 1", snap.Version, snap.EvidenceLen)
	}

	// A repeat of an update is still recognised after other commits have
	// followed it (up to the ring the run keeps).
	create(t, s, id)
	first := &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"v":1}`),
		Evidence: [][]byte{[]byte(`"one"`)}, CommitID: strings.Repeat("b", 32)}
	if err := s.CommitRun(ctx, first); err != nil {
		t.Fatal(err)
	}
	for v := int64(2); v <= 4; v++ {
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: v - 1, NewVersion: v, Doc: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CommitRun(ctx, first); err != nil {
		t.Fatalf("repeat of a landed update: %v, want nil", err)
	}
	if snap := load(t, s, id); snap.Version != 4 || snap.EvidenceLen != 1 {
		t.Fatalf("after the repeat: version %d, %d evidence entries; want 4, 1", snap.Version, snap.EvidenceLen)
	}

	// Once the ring has moved past it, a repeat is a plain stale write:
	// refused, and nothing written.
	for v := int64(5); v <= 12; v++ {
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: v - 1, NewVersion: v, Doc: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if c := conflict(t, s.CommitRun(ctx, first)); c.Version != 12 {
		t.Fatalf("stale repeat: conflict at %d, want 12", c.Version)
	}

	// A different commit at a version already taken is still a conflict.
	other := *first
	other.CommitID = strings.Repeat("c", 32)
	conflict(t, s.CommitRun(ctx, &other))

	bad := *first
	bad.CommitID = "not-hex"
	if err := s.CommitRun(ctx, &bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("malformed commit id: %v, want ErrInvalid", err)
	}
}

// testDeleteAtVersion deletes only the run the caller read: one written
// since (resumed, answered) is left whole.
func testDeleteAtVersion(t *testing.T, s store.Store) {
	id := s.NewRunID("")
	create(t, s, id, func(c *store.Change) { c.Evidence = [][]byte{[]byte(`"made"`)} })
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"resumed":true}`)}); err != nil {
		t.Fatal(err)
	}
	if c := conflict(t, s.DeleteRun(ctx, id, "", 0)); c.Version != 1 {
		t.Fatalf("stale delete: conflict at %d, want 1", c.Version)
	}
	if snap := load(t, s, id); snap.Version != 1 || snap.EvidenceLen != 1 {
		t.Fatalf("after a refused delete: version %d, %d evidence entries; want the run whole", snap.Version, snap.EvidenceLen)
	}
	if err := s.DeleteRun(ctx, id, "", 1); err != nil {
		t.Fatalf("delete at the stored version: %v", err)
	}
	if _, err := s.LoadRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteRun(ctx, id, "", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of a gone run: %v, want ErrNotFound", err)
	}
}
