package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The store-size benchmark's knobs (environment, so `go test -bench` and
// the bench command share one benchmark): the stored-run counts, in
// increasing order, the list calls sampled for each p99, the repeats of
// each pair and the logical database of the grown store (the small store
// takes the next one).
const (
	envStoreSizes   = "REALM_BENCH_STORE_SIZES"   // default 1000,100000
	envListCalls    = "REALM_BENCH_LIST_CALLS"    // default 200
	envStoreDB      = "REALM_BENCH_STORE_DB"      // default 9
	envStoreRepeats = "REALM_BENCH_STORE_REPEATS" // default 1
	storeWorkers    = 32
	stuckRuns       = 100
)

// BenchmarkStoreSize asks whether the engine's costs are flat in the size
// of the store, measuring a small store and a grown one side by side. Two
// stores live at once, each an engine over a logical database of its own
// on the Redis at REDIS_URL: the small one holds the first size of
// REALM_BENCH_STORE_SIZES throughout, the other is grown through the rest.
// At each larger size N the two take turns, REALM_BENCH_STORE_REPEATS
// times (in the order small, grown, then grown, small, and so on, so
// neither is always first): beside=N/stored=S is the small store,
// beside=N/stored=N the grown one, and repeat i of one pairs with repeat i
// of the other (go test numbers a repeated name #01, #02, ...). With one
// size given, the small store is measured alone (stored=S).
//
// Each measurement makes b.N transitions through gRPC at 32 runs at once
// (transitions/s, and Redis's own time per commit script), then samples
// `realm run list` (a page of 100) and `realm run list --stuck` through
// gRPC ListRuns (list-p99-µs, stuck-p99-µs), then deletes the runs it
// made, so the store stays at its size.
//
// Each store's first 900 runs are real: the engine drives each through
// the ten steps. The small store's Redis footprint (MEMORY USAGE of every
// key under its prefix, indexes included, over the runs) is reported with
// its first measurement as B/finished-run once the engine's sweep has
// packed them, and as B/finished-run-unpacked before. The rest are clones
// of one of the packed runs, key by key with the run id replaced (inside
// the packed field too), written with pipelined commands; 100 more carry a
// claim an hour past its deadline, for --stuck to find.
//
//	cd engine-svc && REALM_BENCH_STORE_SIZES=1000,100000,1000000 REALM_BENCH_STORE_REPEATS=3 go test -run '^$' -bench StoreSize -benchtime 30000x ./internal/server/
func BenchmarkStoreSize(b *testing.B) {
	engineGC(b)
	sizes := envInts(b, envStoreSizes, []int{1000, 100000})
	if !slices.IsSorted(sizes) || len(sizes) == 0 {
		b.Fatalf("%s=%v: want counts in increasing order", envStoreSizes, sizes)
	}
	calls := envInts(b, envListCalls, []int{200})[0]
	repeats := max(envInts(b, envStoreRepeats, []int{1})[0], 1)
	db := envInts(b, envStoreDB, []int{9})[0]
	small := newSizedStore(b, db+1, sizes[0])
	small.growTo(b, sizes[0])
	// The small store's first measurement reports its bytes per run
	// (decided per sub-benchmark: go test calls each with b.N 1 first).
	reportMemory := true
	measure := func(s *sizedStore) func(*testing.B) {
		memory := reportMemory && s == small
		if memory {
			reportMemory = false
		}
		return func(b *testing.B) { s.measure(b, calls, memory) }
	}
	if len(sizes) == 1 {
		for range repeats {
			b.Run(fmt.Sprintf("stored=%d", sizes[0]), measure(small))
		}
		return
	}
	grown := newSizedStore(b, db, sizes[0])
	for _, n := range sizes[1:] {
		grown.growTo(b, n)
		b.Run(fmt.Sprintf("beside=%d", n), func(b *testing.B) {
			for rep := range repeats {
				pair := []*sizedStore{small, grown}
				if rep%2 == 1 {
					pair[0], pair[1] = grown, small
				}
				for _, s := range pair {
					b.Run(fmt.Sprintf("stored=%d", s.stored), measure(s))
				}
			}
		})
	}
}

// sizedStore is an engine over a store filled to a size: real finished
// runs, stuck runs, and clones of a packed run.
type sizedStore struct {
	e                *env
	stored           int
	tmpl             *runKeys
	perRun, unpacked float64 // Redis bytes per finished run, packed and as written
}

// newSizedStore serves an engine over logical database db and fills it
// with up to 1,000 runs (fewer when first is smaller): real finished runs,
// packed by the engine's own sweep, and stuckRuns stuck ones.
func newSizedStore(b *testing.B, db, first int) *sizedStore {
	e := storeEnv(b, db)
	if r := e.register(b, tenSteps()); !r.GetRegistered() {
		b.Fatal(r.GetReport().GetText())
	}
	c := context.Background()
	finished := finishRuns(b, e, max(min(first, 1000)-stuckRuns, 1))
	s := &sizedStore{e: e, unpacked: prefixMemory(b, e) / float64(len(finished))}
	// The sweeper packs a run that ended a minute ago: the engine's clock
	// moves past the minute, and its own sweep packs them.
	e.clock.Advance(2 * engine.DefaultPackAfter)
	packed := 0
	for {
		n, err := e.eng.SweepPack(c, 500)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		packed += n
	}
	if packed != len(finished) {
		b.Fatalf("the sweep packed %d of the %d finished runs", packed, len(finished))
	}
	s.perRun = prefixMemory(b, e) / float64(len(finished))
	s.tmpl = readRunKeys(b, e, finished[0])
	addStuck(b, e)
	s.stored = len(finished) + stuckRuns
	return s
}

// growTo clones the template run until the store holds n runs.
func (s *sizedStore) growTo(b *testing.B, n int) {
	if n > s.stored {
		cloneRuns(b, s.e, s.tmpl, n-s.stored)
		s.stored = n
	}
}

// measure is one measurement of the store at its size (see
// BenchmarkStoreSize); with memory, it also reports bytes per run.
func (s *sizedStore) measure(b *testing.B, calls int, memory bool) {
	e, c := s.e, context.Background()
	resetCommandStats(b, e)
	made := driveTransitions(b, e, storeWorkers, false)
	// Redis's own time per commit script, over the transitions: what the
	// server spends, apart from the engine and the wire.
	if us, ok := scriptMicros(b, e); ok {
		b.ReportMetric(us, "redis-µs/commit")
	}
	if memory {
		b.ReportMetric(s.perRun, "B/finished-run")
		b.ReportMetric(s.unpacked, "B/finished-run-unpacked")
	}
	p50, p99 := listLatency(b, e, calls, &realmv1.ListRunsRequest{Limit: 100}, 100)
	b.ReportMetric(p50, "list-p50-µs")
	b.ReportMetric(p99, "list-p99-µs")
	secs := int64(24 * 3600)
	p50, p99 = listLatency(b, e, calls, &realmv1.ListRunsRequest{Stuck: true, OlderThanSeconds: &secs}, stuckRuns)
	b.ReportMetric(p50, "stuck-p50-µs")
	b.ReportMetric(p99, "stuck-p99-µs")
	for _, id := range made {
		if err := e.st.DeleteRun(c, id, "", -1); err != nil {
			b.Fatal(err)
		}
	}
}

// resetCommandStats zeroes Redis's per-command statistics.
func resetCommandStats(b *testing.B, e *env) {
	if err := e.rc.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

// scriptMicros is Redis's usec_per_call of EVALSHA since the last reset
// (INFO commandstats): the commit script's time inside the server.
func scriptMicros(b *testing.B, e *env) (float64, bool) {
	info, err := e.rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				us, err := strconv.ParseFloat(v, 64)
				return us, err == nil
			}
		}
	}
	return 0, false
}

// storeEnv serves an engine over logical database db of the Redis at
// REDIS_URL (one no other test uses), under a
// prefix of its own deleted at the end. SCAN walks one database: other
// tests sharing the server clean up their prefixes with SCAN, and would
// otherwise walk the million stored runs on every cleanup, slowing Redis
// for everyone, this benchmark included.
func storeEnv(b *testing.B, db int) *env {
	opts, err := redis.ParseURL(storetest.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	opts.DB = db
	prefix := storetest.UniquePrefix(b)
	b.Cleanup(func() {
		c := redis.NewClient(opts) // the store's client is closed by now
		defer c.Close()
		if err := storetest.DeletePrefix(context.Background(), c, prefix); err != nil {
			b.Errorf("cleanup %s in db %d: %v", prefix, opts.DB, err)
		}
	})
	rc := redis.NewClient(opts)
	if err := rc.Ping(context.Background()).Err(); err != nil {
		b.Fatalf("redis %s db %d: %v", opts.Addr, opts.DB, err)
	}
	counter := &store.RoundTripCounter{}
	st := store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16, Counter: counter})
	b.Cleanup(func() { _ = st.Close() })
	e := engineOn(b, st, rc, prefix)
	e.counter = counter
	return e
}

// envInts reads a comma-separated list of counts from the environment.
func envInts(b *testing.B, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("%s=%q: want counts separated by commas", name, v)
		}
		out = append(out, n)
	}
	return out
}

// finishRuns starts n runs of "bench" and drives each through its ten
// steps on the engine, 32 at once, each answer its own.
func finishRuns(b *testing.B, e *env, n int) []string {
	c := context.Background()
	ids := make([]string, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range storeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				resp, err := e.client.StartRun(c, &realmv1.StartRunRequest{WorkflowId: "bench"})
				if err != nil {
					b.Error(err)
					continue
				}
				ids[i] = resp.GetReply().GetRunId()
				for s := 1; s <= 10; s++ {
					// A different answer at each step, as real work gives:
					// every output and evidence hash differs.
					answer := params(b, map[string]any{"n": i*10 + s, "note": "fine"})
					reply, err := e.eng.ExecuteStep(c, &realmv1.ExecuteStepRequest{RunId: ids[i], Command: "s" + strconv.Itoa(s), Params: answer})
					if err != nil || reply.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
						b.Errorf("step s%d: %v %v", s, err, reply)
						break
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return ids
}

// prefixMemory sums MEMORY USAGE (every element counted) over the keys
// under the env's prefix.
func prefixMemory(b *testing.B, e *env) float64 {
	c := context.Background()
	var total int64
	iter := e.rc.Scan(c, 0, e.prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(c) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	for chunk := range slices.Chunk(keys, 500) {
		cmds, err := e.rc.Pipelined(c, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				p.MemoryUsage(c, k, 0)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, cmd := range cmds {
			total += cmd.(*redis.IntCmd).Val()
		}
	}
	return float64(total)
}

// runKeys is what the engine stored for one run: its hashes and lists by
// key suffix ("" for the run hash, ":out", ":ev"), and its score in each
// bucket index it belongs to.
type runKeys struct {
	id     string
	hashes map[string]map[string]string
	lists  map[string][]string
	scores map[string]float64
	doc    map[string]any // the run document, decoded
	// parts are the packed run's parts, when the run hash is packed.
	parts *runParts
}

type runParts struct {
	doc      []byte
	outputs  map[string][]byte
	evidence [][]byte
}

// packedFor is the template's packed field with its id replaced by id.
func (p *runParts) packedFor(b *testing.B, from, id string) string {
	swap := func(v []byte) []byte { return bytes.ReplaceAll(v, []byte(from), []byte(id)) }
	outs := make(map[string][]byte, len(p.outputs))
	for k, v := range p.outputs {
		outs[k] = swap(v)
	}
	ev := make([][]byte, len(p.evidence))
	for i, v := range p.evidence {
		ev[i] = swap(v)
	}
	pk, err := store.EncodePacked(swap(p.doc), outs, ev)
	if err != nil {
		b.Fatal(err)
	}
	return string(pk)
}

var runIndexes = []string{store.IndexRuns, store.IndexClaims, store.IndexExpiries, store.IndexGateDeadlines,
	store.IndexOpenGates, store.IndexActivity, store.IndexFinalizers, store.IndexBlocked, store.IndexPack}

func readRunKeys(b *testing.B, e *env, id string) *runKeys {
	c := context.Background()
	rk := &runKeys{id: id, hashes: map[string]map[string]string{}, lists: map[string][]string{}, scores: map[string]float64{}}
	base := e.st.RunKey(id)
	for _, suffix := range []string{"", ":out", ":ev"} {
		key := base + suffix
		switch typ := e.rc.Type(c, key).Val(); typ {
		case "hash":
			rk.hashes[suffix] = e.rc.HGetAll(c, key).Val()
		case "list":
			rk.lists[suffix] = e.rc.LRange(c, key, 0, -1).Val()
		case "none":
		default:
			b.Fatalf("%s: unexpected type %s", key, typ)
		}
	}
	for _, ix := range runIndexes {
		if s, err := e.rc.ZScore(c, e.st.IndexKey(e.st.BucketOf(id), ix), id).Result(); err == nil {
			rk.scores[ix] = s
		}
	}
	snap, err := e.st.LoadRun(c, id)
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(snap.Doc, &rk.doc); err != nil {
		b.Fatal(err)
	}
	if pk, ok := rk.hashes[""][store.PackedField]; ok {
		var p runParts
		if p.doc, p.outputs, p.evidence, err = store.DecodePacked([]byte(pk)); err != nil {
			b.Fatal(err)
		}
		rk.parts = &p
	}
	if len(rk.hashes) == 0 || len(rk.scores) == 0 {
		b.Fatalf("run %s: nothing stored under %s", id, base)
	}
	return rk
}

// cloneRuns writes n copies of tmpl under new run ids, each key's values
// with the template's id replaced, in pipelines of 500 runs. Each clone
// sits one millisecond before the previous in the run index, older than
// the real runs, so list pages hold the newest runs as in a real store.
func cloneRuns(b *testing.B, e *env, tmpl *runKeys, n int) {
	c := context.Background()
	const batch = 500
	var wg sync.WaitGroup
	work := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range work {
				_, err := e.rc.Pipelined(c, func(p redis.Pipeliner) error {
					for i := first; i < min(first+batch, n); i++ {
						id := e.st.NewRunID("")
						base := e.st.RunKey(id)
						swap := func(v string) string { return strings.ReplaceAll(v, tmpl.id, id) }
						for suffix, h := range tmpl.hashes {
							args := make([]any, 0, 2*len(h))
							for f, v := range h {
								if suffix == "" && f == store.PackedField {
									v = tmpl.parts.packedFor(b, tmpl.id, id)
								} else {
									v = swap(v)
								}
								args = append(args, f, v)
							}
							p.HSet(c, base+suffix, args...)
						}
						for suffix, l := range tmpl.lists {
							args := make([]any, len(l))
							for j, v := range l {
								args[j] = swap(v)
							}
							p.RPush(c, base+suffix, args...)
						}
						for ix, s := range tmpl.scores {
							if ix == store.IndexRuns {
								s -= float64(i + 1)
							}
							p.ZAdd(c, e.st.IndexKey(e.st.BucketOf(id), ix), redis.Z{Score: s, Member: id})
						}
					}
					return nil
				})
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for first := 0; first < n; first += batch {
		work <- first
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// addStuck stores stuckRuns open runs (a just-started run's document)
// whose first step holds a claim an hour past its deadline, through the
// store's own commit, with the claims index entry the engine would write.
func addStuck(b *testing.B, e *env) {
	c := context.Background()
	resp, err := e.client.StartRun(c, &realmv1.StartRunRequest{WorkflowId: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	open := readRunKeys(b, e, resp.GetReply().GetRunId())
	if err := e.st.DeleteRun(c, open.id, "", -1); err != nil {
		b.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	deadline := past.Format(time.RFC3339Nano)
	for range stuckRuns {
		id := e.st.NewRunID("")
		d := map[string]any{}
		for k, v := range open.doc {
			d[k] = v
		}
		d["id"] = id
		d["in_progress_steps"] = []string{"s1"}
		d["claims"] = map[string]any{"s1": map[string]any{"token": "t", "deadline": deadline, "since": deadline}}
		raw, err := json.Marshal(d)
		if err != nil {
			b.Fatal(err)
		}
		idx := []store.IndexOp{
			{Index: store.IndexRuns, Member: id, Score: float64(past.UnixMilli())},
			{Index: store.IndexClaims, Member: id, Score: float64(past.UnixMilli())},
		}
		if err := e.st.CommitRun(c, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: raw, Index: idx}); err != nil {
			b.Fatal(err)
		}
	}
}

// listLatency calls ListRuns n times, one after another (outside the
// benchmark's clock), and returns the median and 99th percentile latency
// in µs; each page must hold want runs.
func listLatency(b *testing.B, e *env, n int, req *realmv1.ListRunsRequest, want int) (p50, p99 float64) {
	c := context.Background()
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		resp, err := e.client.ListRuns(c, req)
		lat[i] = time.Since(t0)
		if err != nil || len(resp.GetRuns()) != want {
			b.Fatalf("list %v: %v, %d runs, want %d", req, err, len(resp.GetRuns()), want)
		}
	}
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Microseconds()), float64(lat[len(lat)*99/100].Microseconds())
}
