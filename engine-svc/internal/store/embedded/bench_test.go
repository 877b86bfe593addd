package embedded_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

// BenchmarkEmbeddedCommit measures CommitRun of new runs, each fsynced
// before its reply, with 1 and 32 concurrent writers (group commit), and
// at 32 with Options.PipelineCommits, as engine-svc sends them: the
// replies of a pipeline share an fsync.
func BenchmarkEmbeddedCommit(b *testing.B) {
	for _, tc := range []struct {
		writers int
		piped   bool
	}{{1, false}, {32, false}, {32, true}} {
		writers := tc.writers
		name := fmt.Sprintf("writers=%d", writers)
		if tc.piped {
			name += "/pipelined"
		}
		b.Run(name, func(b *testing.B) {
			srv, err := embedded.Open(ctx, b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: writers})
			defer func() { _ = c.Close(); _ = srv.Close() }()
			s := store.NewRedis(c, store.Options{Buckets: 8, PipelineCommits: tc.piped})
			doc := []byte(`{"steps":{"fetch":{"status":"done"}}}`)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						id := s.NewRunID(fmt.Sprint(next.Load()))
						if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: doc}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
