package store_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/respproxy"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
)

// proxiedStore is a store on the real Redis through a proxy that loses
// the replies of commits while lose is set.
func proxiedStore(t *testing.T, opts store.Options) (*store.Redis, *atomic.Bool, *atomic.Int64) {
	t.Helper()
	direct := storetest.ConnectRedis(t)
	p, err := respproxy.Start(direct.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var lose atomic.Bool
	var sent atomic.Int64
	sha := store.CommitScriptHash()
	p.SetRule(func(c respproxy.Command) respproxy.Fault {
		if len(c) < 2 || !strings.EqualFold(c.Name(), "evalsha") || string(c[1]) != sha {
			return respproxy.Pass
		}
		sent.Add(1)
		if lose.Load() {
			return respproxy.Drop
		}
		return respproxy.Pass
	})
	opts.Prefix = storetest.UniquePrefix(t)
	storetest.CleanupPrefix(t, opts.Prefix)
	rc := redis.NewClient(&redis.Options{Addr: p.Addr()})
	s := store.NewRedis(rc, opts)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	return s, &lose, &sent
}

// A commit no answer ever comes back for is reported as of unknown
// outcome, not as failed: Redis did run it (the proxy loses only replies),
// and it is there exactly once however many times it was sent.
func TestACommitWithNoAnswerIsReportedUnknown(t *testing.T) {
	t.Parallel()
	s, lose, sent := proxiedStore(t, store.Options{SettleTimeout: 300 * time.Millisecond})
	id := s.NewRunID("")
	lose.Store(true)
	err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`), Evidence: [][]byte{[]byte(`"made"`)}})
	lose.Store(false)
	if !errors.Is(err, store.ErrOutcomeUnknown) {
		t.Fatalf("commit err = %v, want ErrOutcomeUnknown", err)
	}
	if n := sent.Load(); n < 5 {
		t.Errorf("the commit was sent %d times, want go-redis's 4 and the store's repeats", n)
	}
	if s.Settles() != 1 {
		t.Errorf("Settles() = %d, want 1", s.Settles())
	}
	snap, err := s.LoadRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 0 || snap.EvidenceLen != 1 {
		t.Fatalf("run after %d sends: version %d, %d evidence entries; want 0 and 1", sent.Load(), snap.Version, snap.EvidenceLen)
	}
}

// A caller that has already given up sends nothing: the settling that
// outlives a caller's deadline is for a commit that was sent.
func TestACommitOfACallerThatGaveUpIsNotSent(t *testing.T) {
	t.Parallel()
	s, _, sent := proxiedStore(t, store.Options{})
	done, cancel := context.WithCancel(ctx)
	cancel()
	id := s.NewRunID("")
	if err := s.CommitRun(done, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit err = %v, want context.Canceled", err)
	}
	if _, err := s.LoadRun(ctx, id); !errors.Is(err, store.ErrNotFound) || sent.Load() != 0 {
		t.Fatalf("load = %v after %d sends, want ErrNotFound and none", err, sent.Load())
	}
}
