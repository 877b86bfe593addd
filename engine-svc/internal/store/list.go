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
	fetch := int64(limit + 1)
	older := make([]*redis.ZSliceCmd, r.buckets)
	ties := make([]*redis.ZSliceCmd, r.buckets)
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := 0; b < r.buckets; b++ {
			key := r.IndexKey(b, index)
			if after == nil {
				older[b] = p.ZRevRangeWithScores(ctx, key, 0, fetch-1)
				continue
			}
			s := strconv.FormatFloat(after.score, 'f', -1, 64)
			older[b] = p.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: "(" + s, Min: "-inf", Count: fetch})
			// Entries sharing the cursor's score are few (same millisecond,
			// same bucket); read them all and keep those after the cursor.
			ties[b] = p.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: s, Min: s})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	var all []indexEntry
	for b := 0; b < r.buckets; b++ {
		for _, z := range older[b].Val() {
			all = append(all, indexEntry{score: z.Score, member: fmt.Sprint(z.Member)})
		}
		if ties[b] == nil {
			continue
		}
		for _, z := range ties[b].Val() {
			e := indexEntry{score: z.Score, member: fmt.Sprint(z.Member)}
			if newer(*after, e) < 0 {
				all = append(all, e)
			}
		}
	}
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
