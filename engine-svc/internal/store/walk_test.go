package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// A walk pages by (score, member), not by rank: members sharing a score
// across a page boundary are each seen once, removing what was seen (as
// purge does) never makes the walk skip one, and members scored above
// upTo are not seen.
func TestWalkIndexSeesEachMemberOnceWhileSeenOnesAreRemoved(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		s, c := newChecked(t, b, store.Options{Buckets: 2})
		var want []string
		for i := range 40 {
			id := s.NewRunID("")
			score := float64(1000 + i/15) // runs of 15 ties: every page of 7 ends inside one
			if i >= 35 {
				score = 5000 // past upTo
			} else {
				want = append(want, id)
			}
			if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`),
				Index: []store.IndexOp{{Index: "ties", Member: id, Score: score}}}); err != nil {
				t.Fatal(err)
			}
		}
		var seen []string
		err := s.WalkIndex(ctx, "ties", 4999, 7, func(page []store.IndexEntry) error {
			if len(page) > 7 {
				return fmt.Errorf("a page of %d, size 7", len(page))
			}
			for _, e := range page {
				seen = append(seen, e.Member)
				if err := c.ZRem(ctx, s.IndexKey(s.BucketOf(e.Member), "ties"), e.Member).Err(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(seen)
		slices.Sort(want)
		if !slices.Equal(seen, want) {
			t.Errorf("walk saw %d members (%v), want the %d at or below upTo once each", len(seen), seen, len(want))
		}
	})
}
