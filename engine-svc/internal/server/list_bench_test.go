package server_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// BenchmarkListRuns measures `realm run list` (one page of 100, newest
// first) and `realm run list --stuck` on real Redis holding 100,000 runs,
// 100 of which are stuck (a claim past its deadline). Neither form loads
// every run: list pages through the run index, --stuck reads the due
// members of the timer indexes and loads only those.
//
//	cd engine-svc && go test -run '^$' -bench ListRuns -benchtime 20x ./internal/server/
func BenchmarkListRuns(b *testing.B) {
	const total, stuck = 100000, 100
	e := setup(b, "redis")
	e.register(b, readFile(b, "testdata/triage.yaml"))
	c := context.Background()
	// A real run's document, cloned under new ids.
	seed := start(b, e, "triage", map[string]any{"ticket": 1}).GetRunId()
	snap, err := e.st.LoadRun(c, seed)
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]any
	_ = json.Unmarshal(snap.Doc, &doc)
	now := time.Now()
	var wg sync.WaitGroup
	ids := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				id := e.st.NewRunID("")
				d := map[string]any{}
				for k, v := range doc {
					d[k] = v
				}
				d["id"] = id
				at := now.Add(-time.Duration(i) * time.Second)
				idx := []store.IndexOp{
					{Index: "index", Member: id, Score: float64(at.UnixMilli())},
					{Index: "activity", Member: id, Score: float64(now.UnixMilli())},
				}
				if i < stuck {
					deadline := now.Add(-time.Hour).Format(time.RFC3339Nano)
					d["in_progress_steps"] = []string{"classify"}
					d["claims"] = map[string]any{"classify": map[string]any{"token": "t", "deadline": deadline, "since": deadline}}
					idx = append(idx, store.IndexOp{Index: "claims", Member: id, Score: float64(now.Add(-time.Hour).UnixMilli())})
				}
				raw, _ := json.Marshal(d)
				if err := e.st.CommitRun(c, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: raw, Index: idx}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < total; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()

	b.Run("list_page_100", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			resp, err := e.client.ListRuns(c, &realmv1.ListRunsRequest{Limit: 100})
			if err != nil || len(resp.GetRuns()) != 100 {
				b.Fatalf("list: %v %d", err, len(resp.GetRuns()))
			}
		}
	})
	b.Run("stuck", func(b *testing.B) {
		b.ReportAllocs()
		secs := int64(24 * 3600)
		for i := 0; i < b.N; i++ {
			resp, err := e.client.ListRuns(c, &realmv1.ListRunsRequest{Stuck: true, OlderThanSeconds: &secs})
			if err != nil || len(resp.GetRuns()) != stuck {
				b.Fatalf("stuck: %v %d", err, len(resp.GetRuns()))
			}
		}
	})
}
