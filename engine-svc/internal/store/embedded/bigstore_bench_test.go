package embedded_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

// bigRuns is the size of the store the start-up and compaction benchmarks
// use: the 100,000 runs.
const bigRuns = 100_000

var (
	bigOnce sync.Once
	bigDir  string
	bigErr  error
)

// bigStore builds, once per test binary, a data directory holding bigRuns
// runs shaped as the engine writes them (a ~900-byte document, three step
// outputs, four evidence entries, the run and activity index entries),
// compacted into a base file. It is written in MULTI batches (one fsync
// per 500 runs), which is how it can be built in seconds.
func bigStore(b *testing.B) string {
	bigOnce.Do(func() {
		bigDir, bigErr = os.MkdirTemp("", "realm-bigstore-")
		if bigErr != nil {
			return
		}
		srv, err := embedded.Open(ctx, bigDir, nil)
		if err != nil {
			bigErr = err
			return
		}
		defer func() { _ = srv.Close() }()
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: -1})
		defer func() { _ = c.Close() }()
		s := store.NewRedis(c, store.Options{Buckets: store.DefaultBuckets})
		began := time.Now()
		doc := `{"pad":"` + strings.Repeat("x", 880) + `"}`
		for start := 0; start < bigRuns; start += 500 {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for i := start; i < start+500 && i < bigRuns; i++ {
					id := s.NewRunID("")
					run := s.RunKey(id)
					p.HSet(ctx, run, "v", "6", "doc", doc, "cids", strings.Repeat("ab", 16*8))
					p.HSet(ctx, run+":out", "fetch", `{"rows":12}`, "price", `{"total":42.5}`, "draft", `{"reply":"`+strings.Repeat("y", 60)+`"}`)
					p.RPush(ctx, run+":ev", `{"step":"fetch","status":"completed"}`, `{"step":"price","status":"completed"}`,
						`{"step":"draft","status":"completed"}`, `{"event":"sealed","phase":"completed"}`)
					bucket := s.BucketOf(id)
					p.ZAdd(ctx, s.IndexKey(bucket, store.IndexRuns), redis.Z{Score: float64(1_700_000_000_000 + i), Member: id})
					p.ZAdd(ctx, s.IndexKey(bucket, store.IndexActivity), redis.Z{Score: float64(1_700_000_000_000 + i), Member: id})
				}
				return nil
			})
			if err != nil {
				bigErr = fmt.Errorf("fill at run %d: %w", start, err)
				return
			}
			if start%10000 == 0 {
				fmt.Fprintf(os.Stderr, "filled %d runs in %v\n", start, time.Since(began))
			}
		}
		bigErr = srv.Snapshot(ctx)
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigDir
}

// TestMain removes the big store, if a benchmark built one.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigDir != "" {
		_ = os.RemoveAll(bigDir)
	}
	os.Exit(code)
}

// BenchmarkEmbeddedStartup opens a 100,000-run store: load the base,
// replay the (empty) journal, write a fresh base.
func BenchmarkEmbeddedStartup(b *testing.B) {
	src := bigStore(b)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := copyDir(b, src)
		b.StartTimer()
		srv, err := embedded.Open(ctx, dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = srv.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
}

// BenchmarkEmbeddedCompactionLatency measures what writers see while a
// 100,000-run store compacts: 8 writers commit updates of their own runs
// without pause; a compaction is forced; the latencies of the commits made
// while it ran give the p99 and the maximum, next to the same writers'
// p99 without a compaction.
func BenchmarkEmbeddedCompactionLatency(b *testing.B) {
	src := bigStore(b)
	for range b.N {
		b.StopTimer()
		dir := copyDir(b, src)
		srv, err := embedded.Open(ctx, dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 8})
		s := store.NewRedis(c, store.Options{Buckets: store.DefaultBuckets})
		var (
			compacting atomic.Bool
			stop       atomic.Bool
			mu         sync.Mutex
			during     []time.Duration
			before     []time.Duration
			wg         sync.WaitGroup
		)
		doc := []byte(`{"pad":"` + strings.Repeat("x", 880) + `"}`)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := s.NewRunID("")
				for v := int64(-1); !stop.Load(); v++ {
					t0 := time.Now()
					in := compacting.Load()
					err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: v, NewVersion: v + 1, Doc: doc,
						Evidence: [][]byte{[]byte(`{"writer":` + strconv.Itoa(w) + `}`)}})
					took := time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					if in || compacting.Load() {
						during = append(during, took)
					} else {
						before = append(before, took)
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Second)
		b.StartTimer()
		compacting.Store(true)
		t0 := time.Now()
		if err := srv.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		compacting.Store(false)
		b.StopTimer()
		time.Sleep(200 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		_ = c.Close()
		_ = srv.Close()
		slices.Sort(during)
		slices.Sort(before)
		if len(during) == 0 || len(before) == 0 {
			b.Fatalf("%d commits during the compaction, %d before", len(during), len(before))
		}
		b.ReportMetric(float64(took.Milliseconds()), "compaction-ms")
		b.ReportMetric(float64(len(during)), "commits-during")
		b.ReportMetric(float64(during[len(during)*99/100].Microseconds())/1000, "p99-during-ms")
		b.ReportMetric(float64(during[len(during)-1].Microseconds())/1000, "max-during-ms")
		b.ReportMetric(float64(before[len(before)*99/100].Microseconds())/1000, "p99-before-ms")
	}
}
