package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The operator's batch commands (drain --all, purge --older-than, gc) walk
// the store a page at a time: a store of any size is never read whole, and
// memory stays that of one page whatever the store holds.

// DefaultWalkPage and MaxWalkPage bound a walk's page.
const (
	DefaultWalkPage = 200
	MaxWalkPage     = 1000
)

// WalkPage clamps a requested page size to [1, MaxWalkPage], def when ≤ 0.
func WalkPage(n, def int) int {
	if n <= 0 {
		return def
	}
	return min(n, MaxWalkPage)
}

// IndexEntry is one member of a bucket index and its score.
type IndexEntry struct {
	Member string
	Score  float64
}

// ascending orders entries by score, then member: ZRANGEBYSCORE's order.
func ascending(a, b IndexEntry) int {
	if c := cmp.Compare(a.Score, b.Score); c != 0 {
		return c
	}
	return strings.Compare(a.Member, b.Member)
}

// WalkIndex calls fn with the members of a bucket index scored at or below
// upTo, at most size at a time, bucket by bucket and in score order within
// a bucket. Each bucket's cursor is the last entry returned (score and
// member), not a rank, so members removed meanwhile (a purged run) never
// make the walk skip one; a member added meanwhile may or may not be seen.
// Every read names one bucket's key, so the walk works on Redis Cluster.
func (r *Redis) WalkIndex(ctx context.Context, index string, upTo float64, size int, fn func([]IndexEntry) error) error {
	if err := validName(index); err != nil {
		return err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}
	size = WalkPage(size, DefaultWalkPage)
	var buf []IndexEntry
	flush := func(all bool) error {
		for len(buf) >= size || (all && len(buf) > 0) {
			n := min(size, len(buf))
			if err := fn(buf[:n:n]); err != nil {
				return err
			}
			buf = slices.Delete(buf, 0, n)
		}
		return nil
	}
	for b := 0; b < r.buckets; b++ {
		var after *IndexEntry
		for {
			page, more, err := r.indexPage(ctx, r.IndexKey(b, index), after, upTo, size)
			if err != nil {
				return err
			}
			buf = append(buf, page...)
			if err := flush(false); err != nil {
				return err
			}
			if !more {
				break
			}
			last := page[len(page)-1]
			after = &last
		}
	}
	return flush(true)
}

// indexPage reads one page of one bucket index after the cursor, in one
// pipelined round trip, and reports whether more may follow.
func (r *Redis) indexPage(ctx context.Context, key string, after *IndexEntry, upTo float64, size int) ([]IndexEntry, bool, error) {
	max := strconv.FormatFloat(upTo, 'f', -1, 64)
	if math.IsInf(upTo, 1) {
		max = "+inf"
	}
	var next, ties *redis.ZSliceCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		min := "-inf"
		if after != nil {
			s := strconv.FormatFloat(after.Score, 'f', -1, 64)
			min = "(" + s
			// Entries sharing the cursor's score are few (one millisecond
			// of one bucket): read them all, keep those past the cursor.
			ties = p.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: s, Max: s})
		}
		next = p.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: min, Max: max, Count: int64(size)})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: walk %s: %w", key, err)
	}
	var out []IndexEntry
	if ties != nil {
		for _, z := range ties.Val() {
			e := IndexEntry{Member: fmt.Sprint(z.Member), Score: z.Score}
			if ascending(*after, e) < 0 && e.Score <= upTo {
				out = append(out, e)
			}
		}
	}
	for _, z := range next.Val() {
		out = append(out, IndexEntry{Member: fmt.Sprint(z.Member), Score: z.Score})
	}
	slices.SortFunc(out, ascending)
	more := len(next.Val()) == size || len(out) > size
	if len(out) > size {
		out = out[:size]
	}
	return out, more && len(out) > 0, nil
}

// EachRun calls fn with the stored run documents, at most size at a time,
// found by key (a run missing from the run index is found too): a SCAN
// over the store's keys, one Cluster master after another, whose run
// documents are read a page at a time. A document deleted between the scan
// and its read is left out. SCAN may return a key twice; a caller acting
// on a run decides again on what it reads then, so a repeat changes
// nothing twice.
//
// On a Redis server SCAN pages the key names too. The embedded store's
// SCAN (miniredis) answers with every key name at once: the names, never
// the documents, are then held whole.
func (r *Redis) EachRun(ctx context.Context, size int, fn func([]StoredRun) error) error {
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}
	size = WalkPage(size, scanBatch)
	return r.scanKeys(ctx, globEscape(r.prefix)+":{b*}:run:*", func(keys []string) error {
		var ids []string
		for _, k := range keys {
			rest, ok := r.bucketRest(k)
			if !ok {
				continue
			}
			if id, ok := strings.CutPrefix(rest, runKeyPrefix); ok && id != "" && !strings.Contains(id, ":") {
				ids = append(ids, id)
			}
		}
		for chunk := range slices.Chunk(ids, size) {
			runs, err := r.readRuns(ctx, chunk)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				continue
			}
			if err := fn(runs); err != nil {
				return err
			}
		}
		return nil
	})
}

// readRuns reads the documents of ids in one pipeline, leaving out the
// ones gone.
func (r *Redis) readRuns(ctx context.Context, ids []string) ([]StoredRun, error) {
	docs, err := r.loadDocs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]StoredRun, 0, len(ids))
	for i, d := range docs {
		if d != nil {
			out = append(out, StoredRun{ID: ids[i], Version: d.Version, Doc: d.Doc, Packed: d.Packed})
		}
	}
	return out, nil
}

// IndexMembership reads, for the runs named, which run indexes hold them:
// index name -> run id -> true. One pipeline, one ZSCORE per run and index.
func (r *Redis) IndexMembership(ctx context.Context, ids []string) (map[string]map[string]bool, error) {
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	type read struct {
		index, id string
		cmd       *redis.FloatCmd
	}
	reads := make([]read, 0, len(ids)*len(r.runIndexes))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			b := r.BucketOf(id)
			for _, ix := range r.runIndexes {
				reads = append(reads, read{ix, id, p.ZScore(ctx, r.IndexKey(b, ix), id)})
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: read run indexes: %w", err)
	}
	out := make(map[string]map[string]bool, len(r.runIndexes))
	for _, ix := range r.runIndexes {
		out[ix] = map[string]bool{}
	}
	for _, rd := range reads {
		if rd.cmd.Err() == nil {
			out[rd.index][rd.id] = true
		}
	}
	return out, nil
}

// EachResidue is FindResidue a page at a time: fn gets at most size
// residues per call, confirmed run-less when read. Side keys come from a
// SCAN (see EachRun), index entries from a walk of each run index.
func (r *Redis) EachResidue(ctx context.Context, size int, fn func([]Residue) error) error {
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}
	size = WalkPage(size, scanBatch)
	emit := func(found []Residue) error {
		found, err := r.confirmResidue(ctx, found)
		if err != nil || len(found) == 0 {
			return err
		}
		return fn(found)
	}
	err := r.scanKeys(ctx, globEscape(r.prefix)+":{b*", func(keys []string) error {
		for chunk := range slices.Chunk(keys, size) {
			found, err := r.sideResidue(ctx, chunk)
			if err != nil {
				return err
			}
			if err := emit(found); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, ix := range r.runIndexes {
		err := r.WalkIndex(ctx, ix, math.Inf(1), size, func(page []IndexEntry) error {
			found := make([]Residue, 0, len(page))
			for _, m := range page {
				res := Residue{Kind: ResidueIndex, RunID: m.Member, Key: r.IndexKey(r.BucketOf(m.Member), ix)}
				if timedIndexes[ix] && m.Score > 0 {
					res.At = msTime(m.Score)
				}
				found = append(found, res)
			}
			return emit(found)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sideResidue turns scanned keys into residue candidates: every outputs
// and evidence key (confirmResidue keeps those whose run is gone) and
// every idempotency key naming a run id.
func (r *Redis) sideResidue(ctx context.Context, keys []string) ([]Residue, error) {
	var found []Residue
	var idem []string
	for _, k := range keys {
		rest, ok := r.bucketRest(k)
		if !ok {
			continue
		}
		if h, ok := strings.CutPrefix(rest, "idem:"); ok && h != "" {
			idem = append(idem, k)
			continue
		}
		id, ok := strings.CutPrefix(rest, runKeyPrefix)
		if !ok {
			continue
		}
		switch {
		case strings.HasSuffix(id, outputsSuffix):
			found = append(found, Residue{Kind: ResidueOutputs, RunID: strings.TrimSuffix(id, outputsSuffix), Key: k})
		case strings.HasSuffix(id, evidenceSuffix):
			found = append(found, Residue{Kind: ResidueEvidence, RunID: strings.TrimSuffix(id, evidenceSuffix), Key: k})
		}
	}
	if len(idem) == 0 {
		return found, nil
	}
	holders, err := r.idemHolders(ctx, idem)
	if err != nil {
		return nil, err
	}
	for i, k := range idem {
		if holder := holders[i]; holder != "" && validRunID(holder) == nil {
			found = append(found, Residue{Kind: ResidueKey, RunID: holder, Key: k})
		}
	}
	return found, nil
}

// msTime is an index score in milliseconds as a time.
func msTime(score float64) time.Time { return time.UnixMilli(int64(score)).UTC() }

// idemHolders reads, in one pipeline, the run each idempotency key names
// ("" for a key gone since it was listed).
func (r *Redis) idemHolders(ctx context.Context, keys []string) ([]string, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: read idempotency keys: %w", err)
	}
	out := make([]string, len(keys))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}
