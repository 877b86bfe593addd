package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// holdHook holds the first commit script sent once armed, until released,
// and records the length of every pipeline.
type holdHook struct {
	mu        sync.Mutex
	armed     bool
	held      chan struct{} // closed when the held command arrives
	release   chan struct{}
	pipelines []int
	// beforePipeline, when set, runs once before the next pipeline.
	beforePipeline func()
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		hold := h.armed && strings.HasPrefix(cmd.Name(), "eval")
		if hold {
			h.armed = false
		}
		h.mu.Unlock()
		if hold {
			close(h.held)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.pipelines = append(h.pipelines, len(cmds))
		before := h.beforePipeline
		h.beforePipeline = nil
		h.mu.Unlock()
		if before != nil {
			before()
		}
		return next(ctx, cmds)
	}
}

func TestConcurrentCommitsShareOnePipeline(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{PipelineCommits: true})
		h := &holdHook{held: make(chan struct{}), release: make(chan struct{})}
		c.AddHook(h)
		const n = 8
		ids := make([]string, n)
		for i := range ids {
			ids[i] = s.NewRunID("")
			if err := s.CommitRun(ctx, &store.Change{RunID: ids[i], ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		h.mu.Lock()
		h.armed, h.pipelines = true, nil
		h.mu.Unlock()

		// The first commit is held on the wire; the others queue behind it
		// and must go out together. The last one expects a stale version.
		errs := make([]error, n)
		var wg sync.WaitGroup
		commit := func(i int) {
			defer wg.Done()
			expect := int64(0)
			if i == n-1 {
				expect = 5
			}
			errs[i] = s.CommitRun(ctx, &store.Change{RunID: ids[i], ExpectVersion: expect, NewVersion: expect + 1,
				Doc: fmt.Appendf(nil, `{"i":%d}`, i), Evidence: [][]byte{[]byte("e")}})
		}
		wg.Add(1)
		go commit(0)
		<-h.held
		for i := 1; i < n; i++ {
			wg.Add(1)
			go commit(i)
		}
		for deadline := time.Now().Add(10 * time.Second); s.QueuedCommits() < n-1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				close(h.release)
				t.Fatalf("%d commits queued behind the one in flight, want %d", s.QueuedCommits(), n-1)
			}
		}
		close(h.release)
		wg.Wait()

		h.mu.Lock()
		pipelines := h.pipelines
		h.mu.Unlock()
		if total := sum(pipelines); total != n-1 {
			t.Errorf("pipelines %v carry %d commands, want the %d queued commits", pipelines, total, n-1)
		}
		if b.name != "Cluster" && len(pipelines) != 1 {
			t.Errorf("pipelines %v, want one", pipelines)
		}
		for i, id := range ids {
			snap := load(t, s, id)
			if i == n-1 {
				conflict(t, errs[i])
				if snap.Version != 0 {
					t.Errorf("refused commit moved run %d to version %d", i, snap.Version)
				}
				continue
			}
			if errs[i] != nil {
				t.Errorf("commit %d: %v", i, errs[i])
			}
			if want := fmt.Sprintf(`{"i":%d}`, i); snap.Version != 1 || string(snap.Doc) != want {
				t.Errorf("run %d: version %d doc %s, want 1 %s", i, snap.Version, snap.Doc, want)
			}
		}
	})
}

// A batch that reaches a server which lost its script cache (a restart, a
// SCRIPT FLUSH) still lands: each commit is sent again with the script's
// body.
func TestPipelinedCommitsSurviveAFlushedScriptCache(t *testing.T) {
	t.Parallel()
	s, c := newChecked(t, backend{"Embedded", embeddedRedis}, store.Options{PipelineCommits: true})
	h := &holdHook{held: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	const n = 4
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.NewRunID("")
		if err := s.CommitRun(ctx, &store.Change{RunID: ids[i], ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	h.armed = true
	h.beforePipeline = func() {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Error(err)
		}
	}
	h.mu.Unlock()
	errs := make([]error, n)
	var wg sync.WaitGroup
	commit := func(i int) {
		defer wg.Done()
		errs[i] = s.CommitRun(ctx, &store.Change{RunID: ids[i], ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"x":1}`)})
	}
	wg.Add(1)
	go commit(0)
	<-h.held
	for i := 1; i < n; i++ {
		wg.Add(1)
		go commit(i)
	}
	for s.QueuedCommits() < n-1 {
		time.Sleep(time.Millisecond)
	}
	close(h.release)
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			t.Errorf("commit %d: %v", i, errs[i])
		}
		if v := load(t, s, id).Version; v != 1 {
			t.Errorf("run %d at version %d, want 1", i, v)
		}
	}
}

func sum(xs []int) (n int) {
	for _, x := range xs {
		n += x
	}
	return n
}

func load(t *testing.T, s *store.Redis, id string) *store.Snapshot {
	t.Helper()
	snap, err := s.LoadRun(ctx, id)
	if err != nil {
		t.Fatalf("load %s: %v", id, err)
	}
	return snap
}

func conflict(t *testing.T, err error) {
	t.Helper()
	if !store.IsConflict(err) {
		t.Errorf("got %v, want a conflict", err)
	}
}

// A lone commit to a server that lost its script cache is sent again with
// the script's body, pipelined or not.
func TestCommitAfterAFlushedScriptCacheLands(t *testing.T) {
	t.Parallel()
	for _, piped := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipelined=%v", piped), func(t *testing.T) {
			t.Parallel()
			s, c := newChecked(t, backend{"Embedded", embeddedRedis}, store.Options{PipelineCommits: piped})
			id := s.NewRunID("")
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if v := load(t, s, id).Version; v != 0 {
				t.Errorf("version %d, want 0", v)
			}
		})
	}
}

// A commit whose caller gives up while it waits behind the batch on the
// wire is withdrawn: never sent, and its error says so (not an unknown
// outcome).
func TestQueuedCommitIsWithdrawnWhenItsCallerGivesUp(t *testing.T) {
	t.Parallel()
	s, c := newChecked(t, backend{"RealRedis", realRedis}, store.Options{PipelineCommits: true})
	h := &holdHook{held: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(h)
	ids := []string{s.NewRunID(""), s.NewRunID("")}
	for _, id := range ids {
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	change := func(id string) *store.Change {
		return &store.Change{RunID: id, ExpectVersion: 0, NewVersion: 1, Doc: []byte(`{"x":1}`)}
	}
	held := make(chan error, 1)
	go func() { held <- s.CommitRun(ctx, change(ids[0])) }()
	<-h.held
	gctx, giveUp := context.WithCancel(ctx)
	queued := make(chan error, 1)
	go func() { queued <- s.CommitRun(gctx, change(ids[1])) }()
	for s.QueuedCommits() < 1 {
		time.Sleep(time.Millisecond)
	}
	giveUp()
	var err error
	select {
	case err = <-queued:
	case <-time.After(10 * time.Second): // it waits for the held batch
		close(h.release)
		t.Fatalf("the commit given up stayed queued: %v", <-queued)
	}
	close(h.release)
	if err := <-held; err != nil {
		t.Fatalf("held commit: %v", err)
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrOutcomeUnknown) {
		t.Errorf("withdrawn commit: %v, want context.Canceled and a known outcome", err)
	}
	if v := load(t, s, ids[1]).Version; v != 0 {
		t.Errorf("withdrawn commit landed: version %d", v)
	}
	if n := s.QueuedCommits(); n != 0 {
		t.Errorf("%d commits still queued", n)
	}
}
