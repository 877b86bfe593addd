package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
)

var ctx = context.Background()

// backend opens a store on a fresh prefix of one server kind.
type backend struct {
	name string
	open func(t *testing.T, prefix string, opts store.Options) (*store.Redis, redis.UniversalClient)
}

// realRedis is the Redis at $REDIS_URL (default 127.0.0.1:6379). Its
// absence fails the test: CI starts redis-server.
func realRedis(t *testing.T, prefix string, opts store.Options) (*store.Redis, redis.UniversalClient) {
	t.Helper()
	c := storetest.ConnectRedis(t)
	storetest.CleanupPrefix(t, prefix)
	opts.Prefix = prefix
	return store.NewRedis(c, opts), c
}

// embeddedRedis is the in-process miniredis a laptop runs.
func embeddedRedis(t *testing.T, prefix string, opts store.Options) (*store.Redis, redis.UniversalClient) {
	t.Helper()
	srv, err := embedded.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() {
		_ = c.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close embedded: %v", err)
		}
	})
	opts.Prefix = prefix
	return store.NewRedis(c, opts), c
}

// clusterRedis is the Redis Cluster at $REDIS_CLUSTER_ADDRS (three
// masters; scripts/redis-cluster.sh starts it): every script's keys must
// share one slot, and scans must visit every master.
func clusterRedis(t *testing.T, prefix string, opts store.Options) (*store.Redis, redis.UniversalClient) {
	t.Helper()
	c := storetest.ConnectCluster(t)
	storetest.CleanupClusterPrefix(t, prefix)
	opts.Prefix = prefix
	return store.NewRedis(c, opts), c
}

var backends = []backend{
	{"RealRedis", realRedis},
	{"Embedded", embeddedRedis},
	{"Cluster", clusterRedis},
}

func newChecked(t *testing.T, b backend, opts store.Options) (*store.Redis, redis.UniversalClient) {
	t.Helper()
	s, c := b.open(t, storetest.UniquePrefix(t), opts)
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		// Pipelined commits (Options.PipelineCommits) keep every promise.
		for _, piped := range []bool{false, true} {
			name := b.name
			if piped {
				name += "/pipelined"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				storetest.Exercise(t, func(t *testing.T) store.Store {
					s, _ := newChecked(t, b, store.Options{PipelineCommits: piped})
					return s
				})
			})
		}
	}
}

// eachBackend runs fn against every backend in parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

func TestLoadAndCommitAreOneRoundTripEach(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		counter := &store.RoundTripCounter{}
		s, _ := newChecked(t, b, store.Options{Counter: counter})
		key := "wf\x00rt"
		id := s.NewRunID(key)
		steps := []struct {
			name string
			do   func() error
		}{
			{"create with key, outputs, evidence, index", func() error {
				return s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
					Outputs:  map[string][]byte{"a": []byte(`1`)},
					Evidence: [][]byte{[]byte(`e1`), []byte(`e2`)},
					Index:    []store.IndexOp{{Index: "index", Member: id, Score: 1}, {Index: "expiries", Member: id, Score: 2}},
					IdemKey:  key})
			}},
			{"load", func() error { _, err := s.LoadRun(ctx, id); return err }},
			{"commit", func() error {
				return s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"x":1}`),
					Outputs: map[string][]byte{"a": nil}, Evidence: [][]byte{[]byte(`e3`)}})
			}},
			{"refused commit", func() error {
				err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`)})
				if !store.IsConflict(err) {
					return fmt.Errorf("want conflict, got %v", err)
				}
				return nil
			}},
		}
		for _, st := range steps {
			counter.Reset()
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if n := counter.Count(); n != 1 {
				t.Fatalf("%s took %d round trips, want 1", st.name, n)
			}
		}
	})
}

func TestBucketCountMismatchIsRefused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		prefix := storetest.UniquePrefix(t)
		first, c := b.open(t, prefix, store.Options{Buckets: 16})
		if err := first.CommitRun(ctx, &store.Change{RunID: first.NewRunID(""), ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.HGet(ctx, prefix+":meta", "buckets").Result(); got != "16" {
			t.Fatalf("%s:meta buckets = %q, want 16", prefix, got)
		}
		second := store.NewRedis(c, store.Options{Buckets: 32, Prefix: prefix})
		if err := second.Check(ctx); !errors.Is(err, store.ErrBucketMismatch) {
			t.Fatalf("check with 32 buckets: %v, want ErrBucketMismatch", err)
		}
		if _, err := second.LoadRun(ctx, second.NewRunID("")); !errors.Is(err, store.ErrBucketMismatch) {
			t.Fatalf("load with 32 buckets: %v, want ErrBucketMismatch", err)
		}
		if _, err := second.ListRuns(ctx, store.ListFilter{}); !errors.Is(err, store.ErrBucketMismatch) {
			t.Fatalf("list with 32 buckets: %v, want ErrBucketMismatch", err)
		}
		same := store.NewRedis(c, store.Options{Buckets: 16, Prefix: prefix})
		if err := same.Check(ctx); err != nil {
			t.Fatalf("reopen with the stored count: %v", err)
		}
	})
}

// allKeys is KEYS pattern on every master (one server's keys otherwise).
func allKeys(c redis.UniversalClient, pattern string) ([]string, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	})
	return out, err
}

func TestRunKeysShareTheBucketHashTag(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		prefix := storetest.UniquePrefix(t)
		s, c := b.open(t, prefix, store.Options{Buckets: 64})
		key := "wf\x00tagged"
		id := s.NewRunID(key)
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
			Outputs: map[string][]byte{"a": []byte(`1`)}, Evidence: [][]byte{[]byte(`e`)},
			Index:   []store.IndexOp{{Index: "index", Member: id, Score: 1}, {Index: "expiries", Member: id, Score: 5}},
			IdemKey: key}); err != nil {
			t.Fatal(err)
		}
		tag := fmt.Sprintf("%s:{b%d}:", prefix, s.BucketOf(id))
		want := []string{
			tag + "run:" + id, tag + "run:" + id + ":out", tag + "run:" + id + ":ev",
			tag + "idem:" + store.KeyHash(key), tag + "index", tag + "expiries",
		}
		got, err := allKeys(c, prefix+":{*")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("keys = %v, want %v", got, want)
		}
		for _, k := range want {
			if n, _ := c.Exists(ctx, k).Result(); n != 1 {
				t.Fatalf("missing key %s (have %v)", k, got)
			}
		}
		if score, err := c.ZScore(ctx, tag+"expiries", id).Result(); err != nil || score != 5 {
			t.Fatalf("expiries score = %v, %v; want 5", score, err)
		}
		// An index op with Remove takes the member out.
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`),
			Index: []store.IndexOp{{Index: "expiries", Member: id, Remove: true}}}); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Exists(ctx, tag+"expiries").Result(); n != 0 {
			t.Fatal("expiries entry survived its removal")
		}
	})
}

func TestNewRunIDIsUUIDv4InTheKeyBucket(t *testing.T) {
	t.Parallel()
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), store.Options{})
	defer s.Close()
	for i := range 20 {
		key := "wf\x00key-" + strconv.Itoa(i)
		id := s.NewRunID(key)
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 {
			t.Fatalf("run id %q is not a UUID v4 (%v)", id, err)
		}
		if s.BucketOf(id) != s.BucketForKey(key) {
			t.Fatalf("run %s in bucket %d, key in %d", id, s.BucketOf(id), s.BucketForKey(key))
		}
	}
	if a, b := s.NewRunID(""), s.NewRunID(""); a == b {
		t.Fatal("two run ids are equal")
	}
}

func TestCommitWithKeyOutsideTheKeyBucketIsRefused(t *testing.T) {
	t.Parallel()
	s := store.NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), store.Options{})
	defer s.Close()
	key := "wf\x00k"
	id := s.NewRunID("")
	for s.BucketOf(id) == s.BucketForKey(key) {
		id = s.NewRunID("")
	}
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`), IdemKey: key})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid (checked before any I/O)", err)
	}
}

func TestIdempotencyKeyTTL(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{IdemTTL: 2 * time.Hour})
		tests := []struct {
			name     string
			ttl      time.Duration
			min, max time.Duration // -1: no expiry
		}{
			{"change ttl wins", time.Hour, 59 * time.Minute, time.Hour},
			{"zero takes the store default", 0, 119 * time.Minute, 2 * time.Hour},
			{"negative keeps forever", -1, -1, -1},
		}
		for i, tc := range tests {
			key := "wf\x00ttl-" + strconv.Itoa(i)
			id := s.NewRunID(key)
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
				IdemKey: key, IdemTTL: tc.ttl}); err != nil {
				t.Fatal(err)
			}
			got, err := c.PTTL(ctx, s.IdemKeyName(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if tc.min == -1 {
				if got >= 0 {
					t.Fatalf("%s: pttl %v, want none", tc.name, got)
				}
				continue
			}
			if got < tc.min || got > tc.max {
				t.Fatalf("%s: pttl %v, want in [%v, %v]", tc.name, got, tc.min, tc.max)
			}
		}
	})
}

// A reader loading while a writer commits must never see a document,
// outputs and evidence from different versions.
func TestLoadNeverMixesVersions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := newChecked(t, b, store.Options{})
		id := s.NewRunID("")
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`0`),
			Outputs: map[string][]byte{"n": []byte(`0`)}}); err != nil {
			t.Fatal(err)
		}
		const commits = 150
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for v := int64(1); v <= commits; v++ {
				n := []byte(strconv.FormatInt(v, 10))
				if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: v - 1, NewVersion: v, Doc: n,
					Outputs: map[string][]byte{"n": n}, Evidence: [][]byte{n}}); err != nil {
					t.Errorf("commit %d: %v", v, err)
					return
				}
			}
		}()
		for finished := false; ; {
			select {
			case <-writerDone:
				finished = true
			default:
			}
			snap, err := s.LoadRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			v := strconv.FormatInt(snap.Version, 10)
			if string(snap.Doc) != v || string(snap.Outputs["n"]) != v || snap.EvidenceLen != snap.Version {
				t.Fatalf("torn read: version %s, doc %s, output %s, evidence %d", v, snap.Doc, snap.Outputs["n"], snap.EvidenceLen)
			}
			if snap.Version == commits || finished {
				break
			}
		}
		<-writerDone
	})
}

func TestListCursorSurvivesNewRuns(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := newChecked(t, b, store.Options{Buckets: 8})
		mk := func(score float64) string {
			id := s.NewRunID("")
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
				Index: []store.IndexOp{{Index: "index", Member: id, Score: score}}}); err != nil {
				t.Fatal(err)
			}
			return id
		}
		older, newest := mk(1), mk(2)
		page, err := s.ListRuns(ctx, store.ListFilter{Limit: 1})
		if err != nil || len(page.RunIDs) != 1 || page.RunIDs[0] != newest || page.Next == "" {
			t.Fatalf("first page = %+v, %v; want [%s] and a cursor", page, err, newest)
		}
		mk(3) // a run created while paging belongs before the cursor
		page, err = s.ListRuns(ctx, store.ListFilter{Limit: 1, Cursor: page.Next})
		if err != nil || len(page.RunIDs) != 1 || page.RunIDs[0] != older || page.Next != "" {
			t.Fatalf("second page = %+v, %v; want [%s] and no cursor", page, err, older)
		}
	})
}

func TestDeleteRemovesConfiguredRunIndexes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{RunIndexes: []string{"activity"}})
		id := s.NewRunID("")
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
			Index: []store.IndexOp{{Index: "index", Member: id, Score: 1}, {Index: "activity", Member: id, Score: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRun(ctx, id, "", -1); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Exists(ctx, s.IndexKey(s.BucketOf(id), "activity")).Result(); n != 0 {
			t.Fatal("activity entry survived the delete")
		}
	})
}

func TestStoredVersionGarbageIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{})
		id := s.NewRunID("")
		if err := c.HSet(ctx, s.RunKey(id), "v", "seven", "doc", "{}").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadRun(ctx, id); err == nil || !strings.Contains(err.Error(), "not a number") {
			t.Fatalf("load: %v, want a not-a-number error", err)
		}
		err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{}`)})
		if err == nil || store.IsConflict(err) {
			t.Fatalf("commit: %v, want a plain error", err)
		}
	})
}

// BenchmarkCommitRun is against real Redis. "bare" is the physical floor (a
// script CAS of a 2 KB document and nothing else); "store" is CommitRun of
// the same document plus one evidence entry and an output.
func BenchmarkCommitRun(b *testing.B) {
	const docSize = 2048
	b.Run("bare", func(b *testing.B) {
		storetest.BareCAS(b, storetest.ConnectRedis(b), docSize)
	})
	b.Run("store", func(b *testing.B) {
		c := storetest.ConnectRedis(b)
		prefix := storetest.UniquePrefix(b)
		storetest.CleanupPrefix(b, prefix)
		s := store.NewRedis(c, store.Options{Prefix: prefix})
		if err := s.Check(ctx); err != nil {
			b.Fatal(err)
		}
		id := s.NewRunID("")
		doc := []byte(strings.Repeat("x", docSize))
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: doc}); err != nil {
			b.Fatal(err)
		}
		ev := [][]byte{[]byte(`{"kind":"step_settled"}`)}
		out := map[string][]byte{"step": []byte(`{"ok":true}`)}
		b.SetBytes(docSize)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: int64(i), NewVersion: int64(i + 1),
				Doc: doc, Evidence: ev, Outputs: out}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoadRun is LoadRun of a 2 KB document against real Redis.
func BenchmarkLoadRun(b *testing.B) {
	c := storetest.ConnectRedis(b)
	prefix := storetest.UniquePrefix(b)
	storetest.CleanupPrefix(b, prefix)
	s := store.NewRedis(c, store.Options{Prefix: prefix})
	id := s.NewRunID("")
	doc := []byte(strings.Repeat("x", 2048))
	if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: doc,
		Outputs: map[string][]byte{"a": []byte(`1`)}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.LoadRun(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
