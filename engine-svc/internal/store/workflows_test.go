package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// putVersions stores versions 1..n of workflow "wf", each `{"v":i}`.
func putVersions(t *testing.T, s *store.Redis, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if _, err := s.PutWorkflow(ctx, "wf", fmt.Appendf(nil, `{"v":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// kept returns the versions of "wf" that GetWorkflowVersion finds among
// 1..upTo, failing on any error but not-found.
func kept(t *testing.T, s *store.Redis, upTo int) []int64 {
	t.Helper()
	var out []int64
	for v := int64(1); v <= int64(upTo); v++ {
		rec, err := s.GetWorkflowVersion(ctx, "wf", v)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"v":%d}`, v); string(rec.Definition) != want {
			t.Fatalf("v%d = %s, want %s", v, rec.Definition, want)
		}
		out = append(out, v)
	}
	return out
}

func TestWorkflowVersionsPrunedToTheKeepLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		keep   int
		puts   int
		oldest int64 // first version kept
		fields int64 // hash fields left: v/t per version, latest, reg, first
	}{
		{"fewer puts than the limit prune nothing", 5, 3, 1, 3*2 + 2},
		{"the newest three of eight are kept", 3, 8, 6, 3*2 + 3},
		{"a limit of one keeps only the latest", 1, 4, 4, 1*2 + 3},
		{"a negative limit keeps every version", -1, 25, 1, 25*2 + 2},
		{"the default keeps twenty", 0, 25, 6, 20*2 + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, b backend) {
				s, c := newChecked(t, b, store.Options{KeepWorkflowVersions: tc.keep})
				putVersions(t, s, tc.puts)
				got := kept(t, s, tc.puts)
				if len(got) == 0 || got[0] != tc.oldest || got[len(got)-1] != int64(tc.puts) || len(got) != tc.puts-int(tc.oldest)+1 {
					t.Fatalf("kept %v, want %d..%d", got, tc.oldest, tc.puts)
				}
				if n, err := s.OldestWorkflowVersion(ctx, "wf"); err != nil || n != tc.oldest {
					t.Errorf("oldest = %d, %v; want %d", n, err, tc.oldest)
				}
				if n, _ := c.HLen(ctx, s.Prefix()+":wf:wf").Result(); n != tc.fields {
					t.Errorf("hash has %d fields, want %d (nothing of a pruned version left)", n, tc.fields)
				}
			})
		})
	}
}

// A store that kept every version and is then given a limit sheds the
// backlog over the next puts, at most a batch per put (a script blocks the
// server while it runs), and never drops one of the newest.
func TestLoweredKeepLimitShedsTheBacklogInBatches(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{KeepWorkflowVersions: 3})
		// 1500 versions written as a store that kept all would have them.
		const old = 1500
		fields := []any{"latest", old}
		for v := 1; v <= old; v++ {
			fields = append(fields, fmt.Sprintf("v%d", v), fmt.Sprintf(`{"v":%d}`, v), fmt.Sprintf("t%d", v), "1")
		}
		if err := c.HSet(ctx, s.Prefix()+":wf:wf", fields...).Err(); err != nil {
			t.Fatal(err)
		}
		put := func() {
			t.Helper()
			if _, err := s.PutWorkflow(ctx, "wf", []byte(`{"new":true}`)); err != nil {
				t.Fatal(err)
			}
		}
		put() // v1501: deletes v1..v1000
		if n, err := s.OldestWorkflowVersion(ctx, "wf"); err != nil || n != 1001 {
			t.Fatalf("after one put oldest = %d, %v; want 1001", n, err)
		}
		put() // v1502: deletes the rest up to v1499
		if n, err := s.OldestWorkflowVersion(ctx, "wf"); err != nil || n != 1500 {
			t.Fatalf("after two puts oldest = %d, %v; want 1500", n, err)
		}
		if n, _ := c.HLen(ctx, s.Prefix()+":wf:wf").Result(); n != 3*2+3 {
			t.Errorf("hash has %d fields, want %d", n, 3*2+3)
		}
		if rec, err := s.GetWorkflow(ctx, "wf"); err != nil || rec.Version != old+2 {
			t.Errorf("latest = %+v, %v; want v%d", rec, err, old+2)
		}
	})
}
