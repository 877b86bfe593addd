package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Maintenance is what the operator's maintenance commands (realm run gc,
// reconcile, migrate, realm workflow migrate) need beyond Store: reading
// the store by its keys rather than by its indexes, and removing what a
// run left behind. Redis implements it; a store without it cannot be
// maintained by these commands.
type Maintenance interface {
	// ScanRuns returns every stored run document, found by key (a run
	// missing from the run index is found too).
	ScanRuns(ctx context.Context) ([]StoredRun, error)
	// EachRun calls fn with the stored run documents, at most size at a
	// time, found by key; nothing is read whole.
	EachRun(ctx context.Context, size int, fn func([]StoredRun) error) error
	// WalkIndex calls fn with the members of a bucket index scored at or
	// below upTo, at most size at a time.
	WalkIndex(ctx context.Context, index string, upTo float64, size int, fn func([]IndexEntry) error) error
	// IndexMembership says which run indexes hold each of the runs named.
	IndexMembership(ctx context.Context, ids []string) (map[string]map[string]bool, error)
	// FindResidue returns the side keys and index entries whose run
	// document is gone.
	FindResidue(ctx context.Context) ([]Residue, error)
	// EachResidue is FindResidue a page of at most size at a time.
	EachResidue(ctx context.Context, size int, fn func([]Residue) error) error
	// ReapResidue removes one residue, atomically and only if its run is
	// still gone (and, for a key pointer, it still names that run). It
	// reports false when there was nothing to remove.
	ReapResidue(ctx context.Context, r Residue) (bool, error)
	// ReapIndexEntry removes runID from its bucket's index, only if the
	// run's document is gone, and reports whether it did.
	ReapIndexEntry(ctx context.Context, index, runID string) (bool, error)
	// IndexMembers returns, per run index, the run ids it holds.
	IndexMembers(ctx context.Context) (map[string]map[string]bool, error)
	// PointKey sets an idempotency key to runID if it still holds expect
	// ("" = unset), and reports whether it did.
	PointKey(ctx context.Context, key, runID, expect string) (bool, error)
	// RewriteWorkflowVersion replaces one stored version of a definition
	// if it is still old, and reports whether it did.
	RewriteWorkflowVersion(ctx context.Context, id string, version int64, old, definition []byte) (bool, error)
	// OldestWorkflowVersion returns the oldest version of a workflow not
	// pruned (1 when none ever was): the versions below it are gone.
	OldestWorkflowVersion(ctx context.Context, id string) (int64, error)
}

var _ Maintenance = (*Redis)(nil)

// StoredRun is one run document as stored.
type StoredRun struct {
	ID      string
	Version int64
	Doc     []byte
	Packed  bool // stored packed (Redis.PackRun)
}

// Residue kinds.
const (
	ResidueOutputs  = "outputs"  // a run's step outputs and trace buffers
	ResidueEvidence = "evidence" // a run's evidence list
	ResidueIndex    = "index"    // a run id in a bucket index
	ResidueKey      = "key"      // an idempotency key pointing at the run
)

// Residue is a side key, or an index entry, whose run document is gone.
type Residue struct {
	Kind  string
	RunID string
	// Key is the Redis key holding it (for an index entry, the index).
	Key string
	// At is when it was last written, when the store knows (the last
	// evidence entry's time, a run index score); zero when unknown.
	At time.Time
}

// scanBatch is the COUNT hint of each SCAN call and the size of each
// pipelined read that follows it.
const scanBatch = 500

// scanKeys calls fn with every key matching pattern, on every master of a
// Cluster. Keys may repeat (SCAN's guarantee); callers dedupe. The masters
// are scanned at once, but fn is called by one of them at a time.
func (r *Redis) scanKeys(ctx context.Context, pattern string, fn func([]string) error) error {
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanBatch).Result()
			if err != nil {
				return fmt.Errorf("store: scan %s: %w", pattern, err)
			}
			if len(keys) > 0 {
				mu.Lock()
				err := fn(keys)
				mu.Unlock()
				if err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, r.c)
}

// globEscape quotes the characters SCAN's MATCH treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// bucketRest returns the part of a bucketed key after its hash tag.
func (r *Redis) bucketRest(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, r.prefix+":{b")
	if !ok {
		return "", false
	}
	_, rest, ok = strings.Cut(rest, "}:")
	return rest, ok
}

// keyInventory is every bucketed key by what it is.
type keyInventory struct {
	docs    map[string]bool   // run ids with a document
	outputs map[string]string // run id -> outputs key
	ev      map[string]string // run id -> evidence key
	idem    []string          // idempotency key names
}

func (r *Redis) inventory(ctx context.Context) (*keyInventory, error) {
	inv := &keyInventory{docs: map[string]bool{}, outputs: map[string]string{}, ev: map[string]string{}}
	seenIdem := map[string]bool{}
	err := r.scanKeys(ctx, globEscape(r.prefix)+":{b*", func(keys []string) error {
		for _, k := range keys {
			rest, ok := r.bucketRest(k)
			if !ok {
				continue
			}
			if h, ok := strings.CutPrefix(rest, "idem:"); ok && h != "" {
				if !seenIdem[k] {
					seenIdem[k] = true
					inv.idem = append(inv.idem, k)
				}
				continue
			}
			id, ok := strings.CutPrefix(rest, runKeyPrefix)
			if !ok {
				continue
			}
			switch {
			case strings.HasSuffix(id, outputsSuffix):
				inv.outputs[strings.TrimSuffix(id, outputsSuffix)] = k
			case strings.HasSuffix(id, evidenceSuffix):
				inv.ev[strings.TrimSuffix(id, evidenceSuffix)] = k
			case !strings.Contains(id, ":"):
				inv.docs[id] = true
			}
		}
		return nil
	})
	return inv, err
}

// ScanRuns returns every stored run document, sorted by id. A document
// deleted between the scan and its read is left out.
func (r *Redis) ScanRuns(ctx context.Context) ([]StoredRun, error) {
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	inv, err := r.inventory(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(inv.docs))
	for id := range inv.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]StoredRun, 0, len(ids))
	for chunk := range slices.Chunk(ids, scanBatch) {
		runs, err := r.readRuns(ctx, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, runs...)
	}
	return out, nil
}

// IndexMembers reads every run index of every bucket.
func (r *Redis) IndexMembers(ctx context.Context) (map[string]map[string]bool, error) {
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	members, err := r.indexScores(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]bool, len(r.runIndexes))
	for _, ix := range r.runIndexes {
		out[ix] = map[string]bool{}
	}
	for _, m := range members {
		out[m.index][m.runID] = true
	}
	return out, nil
}

type indexMember struct {
	index, key, runID string
	score             float64
}

// indexScores reads every run index of every bucket in one pipeline.
func (r *Redis) indexScores(ctx context.Context) ([]indexMember, error) {
	type read struct {
		index, key string
		cmd        *redis.ZSliceCmd
	}
	var reads []read
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := 0; b < r.buckets; b++ {
			for _, ix := range r.runIndexes {
				key := r.IndexKey(b, ix)
				reads = append(reads, read{ix, key, p.ZRangeWithScores(ctx, key, 0, -1)})
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: read run indexes: %w", err)
	}
	var out []indexMember
	for _, rd := range reads {
		for _, z := range rd.cmd.Val() {
			out = append(out, indexMember{index: rd.index, key: rd.key, runID: fmt.Sprint(z.Member), score: z.Score})
		}
	}
	return out, nil
}

// timedIndexes are the run indexes scored by a time that says when the run
// was last active: "index" (created), "activity" and "pack" (last write).
// The others hold deadlines or zeros, which say nothing of age.
var timedIndexes = map[string]bool{IndexRuns: true, IndexActivity: true, IndexPack: true}

// FindResidue returns every side key and index entry whose run document is
// gone, sorted by run id then key. Writes are atomic scripts, so no write
// in flight ever looks like residue; what is found was left by a purge
// (its idempotency key), by eviction, or by hand.
func (r *Redis) FindResidue(ctx context.Context) ([]Residue, error) {
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	inv, err := r.inventory(ctx)
	if err != nil {
		return nil, err
	}
	var found []Residue
	for id, k := range inv.outputs {
		if !inv.docs[id] {
			found = append(found, Residue{Kind: ResidueOutputs, RunID: id, Key: k})
		}
	}
	for id, k := range inv.ev {
		if !inv.docs[id] {
			found = append(found, Residue{Kind: ResidueEvidence, RunID: id, Key: k})
		}
	}
	members, err := r.indexScores(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if inv.docs[m.runID] {
			continue
		}
		res := Residue{Kind: ResidueIndex, RunID: m.runID, Key: m.key}
		if timedIndexes[m.index] && m.score > 0 {
			res.At = time.UnixMilli(int64(m.score)).UTC()
		}
		found = append(found, res)
	}
	for chunk := range slices.Chunk(inv.idem, scanBatch) {
		holders, err := r.idemHolders(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for i, k := range chunk {
			if holder := holders[i]; holder != "" && !inv.docs[holder] && validRunID(holder) == nil {
				found = append(found, Residue{Kind: ResidueKey, RunID: holder, Key: k})
			}
		}
	}
	// The scan is not a snapshot: a run created while it ran may have been
	// missed. Check each candidate's run again, and date evidence.
	return r.confirmResidue(ctx, found)
}

// confirmResidue drops candidates whose run exists and dates evidence by
// its last entry.
func (r *Redis) confirmResidue(ctx context.Context, found []Residue) ([]Residue, error) {
	exists := make([]*redis.IntCmd, len(found))
	last := make([]*redis.StringCmd, len(found))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, f := range found {
			exists[i] = p.Exists(ctx, r.RunKey(f.RunID))
			if f.Kind == ResidueEvidence {
				last[i] = p.LIndex(ctx, f.Key, -1)
			}
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: check residue: %w", err)
	}
	out := found[:0]
	for i, f := range found {
		if exists[i].Val() > 0 {
			continue
		}
		if last[i] != nil {
			var e struct {
				CompletedAt string `json:"completed_at"`
			}
			if json.Unmarshal([]byte(last[i].Val()), &e) == nil {
				if at, err := time.Parse(time.RFC3339Nano, e.CompletedAt); err == nil {
					f.At = at.UTC()
				}
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Residue) int {
		if c := strings.Compare(a.RunID, b.RunID); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

// ReapResidue removes one residue in one script, only while its run is
// still gone.
func (r *Redis) ReapResidue(ctx context.Context, res Residue) (bool, error) {
	if err := validRunID(res.RunID); err != nil {
		return false, err
	}
	if !strings.HasPrefix(res.Key, r.prefix+":{b") {
		return false, fmt.Errorf("%w: key %q is not a bucketed key of this store", ErrInvalid, res.Key)
	}
	op := "del"
	switch res.Kind {
	case ResidueIndex:
		op = "zrem"
	case ResidueKey:
		op = "idem"
	case ResidueOutputs, ResidueEvidence:
	default:
		return false, fmt.Errorf("%w: residue kind %q", ErrInvalid, res.Kind)
	}
	n, err := reapScript.Run(ctx, r.c, []string{r.RunKey(res.RunID), res.Key}, op, res.RunID).Int64()
	if err != nil {
		return false, fmt.Errorf("store: reap %s: %w", res.Key, err)
	}
	return n > 0, nil
}

// ReapIndexEntry removes runID from its bucket's index if its run is gone.
func (r *Redis) ReapIndexEntry(ctx context.Context, index, runID string) (bool, error) {
	if err := validName(index); err != nil {
		return false, err
	}
	if err := validRunID(runID); err != nil {
		return false, err
	}
	return r.ReapResidue(ctx, Residue{Kind: ResidueIndex, RunID: runID, Key: r.IndexKey(r.BucketOf(runID), index)})
}

// PointKey sets an idempotency key to runID if it holds expect.
func (r *Redis) PointKey(ctx context.Context, key, runID, expect string) (bool, error) {
	if key == "" {
		return false, fmt.Errorf("%w: empty idempotency key", ErrInvalid)
	}
	if err := validRunID(runID); err != nil {
		return false, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return false, err
	}
	ttl := "0"
	if r.idemTTL > 0 {
		ttl = strconv.FormatInt(max(r.idemTTL.Milliseconds(), 1), 10)
	}
	n, err := pointKeyScript.Run(ctx, r.c, []string{r.IdemKeyName(key)}, runID, expect, ttl).Int64()
	if err != nil {
		return false, fmt.Errorf("store: point key: %w", err)
	}
	return n == 1, nil
}

// RewriteWorkflowVersion replaces version n of a definition if it still
// reads old. The version number and its registration time stay: this
// corrects the stored copy, it is not a registration.
func (r *Redis) RewriteWorkflowVersion(ctx context.Context, id string, version int64, old, definition []byte) (bool, error) {
	if err := validWorkflowID(id); err != nil {
		return false, err
	}
	if definition == nil {
		return false, fmt.Errorf("%w: workflow %s: nil definition", ErrInvalid, id)
	}
	if err := r.ensureMeta(ctx); err != nil {
		return false, err
	}
	n, err := rewriteWorkflowScript.Run(ctx, r.c, []string{r.wfKey(id)}, "v"+strconv.FormatInt(version, 10), old, definition).Int64()
	if err != nil {
		return false, fmt.Errorf("store: rewrite workflow %s v%d: %w", id, version, err)
	}
	return n == 1, nil
}

// OldestWorkflowVersion reads the workflow's "first" field (see
// putWorkflowScript).
func (r *Redis) OldestWorkflowVersion(ctx context.Context, id string) (int64, error) {
	if err := validWorkflowID(id); err != nil {
		return 0, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return 0, err
	}
	first, err := r.c.HGet(ctx, r.wfKey(id), "first").Result()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: oldest version of workflow %s: %w", id, err)
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("store: workflow %s first version is %q, not a version", id, first)
	}
	return n, nil
}
