package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultListLimit and MaxListLimit bound a ListRuns page.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

type indexEntry struct {
	score  float64
	member string
}

// newer orders entries newest first; equal scores by member, descending,
// the order ZREVRANGE uses within one score.
func newer(a, b indexEntry) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	return strings.Compare(b.member, a.member)
}

// ListRuns pages through the run index, newest first, merging the buckets'
// "index" sets in one pipelined round trip per page. The cursor is the last
// entry returned (score and run id), so runs created while paging never
// shift a page.
func (r *Redis) ListRuns(ctx context.Context, f ListFilter) (*RunPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var after *indexEntry
	if f.Cursor != "" {
		e, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		after = &e
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}

	// One more than a page per bucket: a bucket that returns fewer is
	// exhausted, so "more than limit in total" is exactly "there is a next page".
	index := f.Index
	if index == "" {
		index = IndexRuns
	}
	if err := validName(index); err != nil {
		return nil, err
	}
	// A page needs fetch entries in all; each bucket's share is about
	// fetch/buckets. So each bucket is asked for a few more than its share,
	// and asked again, for four times as many, only while the last entry it
	// gave could still be in the page (it gave all it was asked for and that
	// entry sorts among the first fetch): with 256 buckets a page of 100
	// reads a few hundred entries, not 256 × 101.
	fetch := int64(limit + 1)
	asked := make([]int64, r.buckets)
	got := make([][]indexEntry, r.buckets)
	first := min(fetch, 2*fetch/int64(r.buckets)+2)
	for b := range asked {
		asked[b] = first
	}
	var tied []indexEntry
	pending := make([]int, r.buckets)
	for b := range pending {
		pending[b] = b
	}
	s := ""
	if after != nil {
		s = strconv.FormatFloat(after.score, 'f', -1, 64)
	}
	for round := 0; len(pending) > 0; round++ {
		older := make([]*redis.ZSliceCmd, len(pending))
		var ties []*redis.ZSliceCmd
		_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, b := range pending {
				key := r.IndexKey(b, index)
				if after == nil {
					older[i] = p.ZRevRangeWithScores(ctx, key, 0, asked[b]-1)
					continue
				}
				older[i] = p.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: "(" + s, Min: "-inf", Count: asked[b]})
				if round == 0 {
					// Entries sharing the cursor's score are few (same
					// millisecond, same bucket); read them all once and keep
					// those after the cursor.
					ties = append(ties, p.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: s, Min: s}))
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		for i, b := range pending {
			got[b] = got[b][:0]
			for _, z := range older[i].Val() {
				got[b] = append(got[b], indexEntry{score: z.Score, member: fmt.Sprint(z.Member)})
			}
		}
		for _, t := range ties {
			for _, z := range t.Val() {
				if e := (indexEntry{score: z.Score, member: fmt.Sprint(z.Member)}); newer(*after, e) < 0 {
					tied = append(tied, e)
				}
			}
		}
		// The fetch-th entry so far: a bucket whose last entry sorts after
		// it has nothing more for this page.
		merged := slices.Concat(append(got, tied)...)
		slices.SortFunc(merged, newer)
		var boundary *indexEntry
		if int64(len(merged)) >= fetch {
			boundary = &merged[fetch-1]
		}
		next := pending[:0]
		for _, b := range pending {
			n := int64(len(got[b]))
			if n < asked[b] || asked[b] >= fetch {
				continue // the bucket is exhausted, or gave a whole page
			}
			if boundary != nil && newer(got[b][n-1], *boundary) > 0 {
				continue
			}
			asked[b] = min(fetch, 4*asked[b])
			next = append(next, b)
		}
		pending = next
	}
	all := slices.Concat(append(got, tied)...)
	slices.SortFunc(all, newer)
	page := &RunPage{}
	if len(all) > limit {
		all = all[:limit]
		page.Next = encodeCursor(all[limit-1])
	}
	page.RunIDs = make([]string, len(all))
	for i, e := range all {
		page.RunIDs[i] = e.member
	}
	return page, nil
}

func encodeCursor(e indexEntry) string {
	raw := strconv.FormatFloat(e.score, 'g', -1, 64) + "|" + e.member
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(c string) (indexEntry, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return indexEntry{}, fmt.Errorf("%w: malformed list cursor", ErrInvalid)
	}
	score, member, ok := strings.Cut(string(raw), "|")
	if !ok {
		return indexEntry{}, fmt.Errorf("%w: malformed list cursor", ErrInvalid)
	}
	s, err := strconv.ParseFloat(score, 64)
	if err != nil || s != s {
		return indexEntry{}, fmt.Errorf("%w: malformed list cursor", ErrInvalid)
	}
	return indexEntry{score: s, member: member}, nil
}
