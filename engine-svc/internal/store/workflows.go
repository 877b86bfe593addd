package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Workflow hash fields: "latest" (the newest version number), "v<n>" (the
// definition of version n), "t<n>" (its registration time, unix ms), "reg"
// (the last registration's id and version, for repeats) and "first" (the
// oldest version not pruned; absent: 1).
//
// Only the newest Options.KeepWorkflowVersions versions are kept: a put
// deletes older ones in its own script. No run needs an older one: a run
// does not snapshot its definition, it reads the latest each time it moves
// (workflow-file spec §1), and its record keeps only the author's
// `version` label, so the latest, which is never pruned, is the only
// version any run uses.

// DefaultKeepWorkflowVersions is Options.KeepWorkflowVersions when it is 0.
const DefaultKeepWorkflowVersions = 20

func validWorkflowID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty workflow id", ErrInvalid)
	}
	return nil
}

// PutWorkflow stores definition as the next version of workflow id and
// prunes the versions past Options.KeepWorkflowVersions. The version is
// allocated and written, and old ones deleted, by one script on the
// workflow's hash (one key, so one Cluster slot);
// the listing set is written first, so a crash in between leaves at most a
// listed id without versions (which ListWorkflows skips), never a stored
// workflow missing from the list. Two round trips: the hash and the set may
// live on different Cluster slots.
func (r *Redis) PutWorkflow(ctx context.Context, id string, definition []byte) (*WorkflowRecord, error) {
	if err := validWorkflowID(id); err != nil {
		return nil, err
	}
	if definition == nil {
		return nil, fmt.Errorf("%w: workflow %s: nil definition", ErrInvalid, id)
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	at := r.now().UTC().Truncate(time.Millisecond)
	ms := at.UnixMilli()
	if err := r.c.ZAddNX(ctx, r.wfSetKey(), redis.Z{Score: float64(ms), Member: id}).Err(); err != nil {
		return nil, fmt.Errorf("store: put workflow %s: %w", id, err)
	}
	n, err := putWorkflowScript.Run(ctx, r.c, []string{r.wfKey(id)}, definition, ms, newCommitID(), r.keepVersions).Int64()
	if err != nil {
		return nil, fmt.Errorf("store: put workflow %s: %w", id, err)
	}
	return &WorkflowRecord{ID: id, Version: n, Definition: slices.Clone(definition), RegisteredAt: at}, nil
}

// GetWorkflow returns the latest version of a workflow: "latest", then
// that version. Versions never change once written, but enough puts
// between the two reads can prune the one read; "latest" has then moved,
// so it is read again.
func (r *Redis) GetWorkflow(ctx context.Context, id string) (*WorkflowRecord, error) {
	if err := validWorkflowID(id); err != nil {
		return nil, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	var seen int64
	for attempt := 1; ; attempt++ {
		latest, err := r.c.HGet(ctx, r.wfKey(id), "latest").Result()
		if errors.Is(err, redis.Nil) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("store: get workflow %s: %w", id, err)
		}
		n, err := strconv.ParseInt(latest, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("store: workflow %s latest is %q, not a number", id, latest)
		}
		rec, err := r.GetWorkflowVersion(ctx, id, n)
		if !errors.Is(err, ErrNotFound) || n == seen || attempt == 5 {
			return rec, err
		}
		seen = n // pruned under us: read the new latest
	}
}

// GetWorkflowVersion returns one stored version. ErrNotFound if absent.
func (r *Redis) GetWorkflowVersion(ctx context.Context, id string, version int64) (*WorkflowRecord, error) {
	if err := validWorkflowID(id); err != nil {
		return nil, err
	}
	if version < 1 {
		return nil, ErrNotFound
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	vals, err := r.c.HMGet(ctx, r.wfKey(id), versionFields(version)...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: get workflow %s v%d: %w", id, version, err)
	}
	return workflowRecord(id, version, vals)
}

func versionFields(n int64) []string {
	s := strconv.FormatInt(n, 10)
	return []string{"v" + s, "t" + s}
}

// workflowRecord builds a record from HMGET v<n> t<n>.
func workflowRecord(id string, n int64, vals []any) (*WorkflowRecord, error) {
	if len(vals) != 2 || vals[0] == nil {
		return nil, ErrNotFound
	}
	def, _ := vals[0].(string)
	ts, _ := vals[1].(string)
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("store: workflow %s v%d registered at %q, not a number", id, n, ts)
	}
	return &WorkflowRecord{ID: id, Version: n, Definition: []byte(def), RegisteredAt: time.UnixMilli(ms).UTC()}, nil
}

// ListWorkflows returns the latest version of every workflow, by id, in
// three round trips whatever the number of workflows: the id set, every
// "latest" (pipelined), every latest version (pipelined).
func (r *Redis) ListWorkflows(ctx context.Context) ([]*WorkflowRecord, error) {
	recs, _, err := r.ListWorkflowsPage(ctx, "", 0)
	return recs, err
}

// ListWorkflowsPage returns the latest version of the workflows whose ids
// come after `after`, by id, at most limit of them (0: all), and the id to
// pass as `after` for the next page ("" when there is none). Only the
// page's records are read.
func (r *Redis) ListWorkflowsPage(ctx context.Context, after string, limit int) ([]*WorkflowRecord, string, error) {
	if err := r.ensureMeta(ctx); err != nil {
		return nil, "", err
	}
	ids, err := r.c.ZRange(ctx, r.wfSetKey(), 0, -1).Result()
	if err != nil {
		return nil, "", fmt.Errorf("store: list workflows: %w", err)
	}
	slices.Sort(ids)
	if after != "" {
		i, _ := slices.BinarySearch(ids, after)
		for i < len(ids) && ids[i] <= after {
			i++
		}
		ids = ids[i:]
	}
	next := ""
	if limit > 0 && len(ids) > limit {
		ids, next = ids[:limit], ids[limit-1]
	}
	if len(ids) == 0 {
		return []*WorkflowRecord{}, "", nil
	}
	recs, err := r.latestRecords(ctx, ids)
	return recs, next, err
}

// latestRecords reads the latest version of each workflow in ids (sorted).
func (r *Redis) latestRecords(ctx context.Context, ids []string) ([]*WorkflowRecord, error) {
	latest := make([]*redis.StringCmd, len(ids))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			latest[i] = p.HGet(ctx, r.wfKey(id), "latest")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: list workflows: %w", err)
	}
	type want struct {
		id string
		n  int64
	}
	var wants []want
	for i, id := range ids {
		if errors.Is(latest[i].Err(), redis.Nil) {
			continue // listed but never stored (a crash mid-put)
		}
		n, err := strconv.ParseInt(latest[i].Val(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("store: workflow %s latest is %q, not a number", id, latest[i].Val())
		}
		wants = append(wants, want{id, n})
	}
	recs := make([]*redis.SliceCmd, len(wants))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, w := range wants {
			recs[i] = p.HMGet(ctx, r.wfKey(w.id), versionFields(w.n)...)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: list workflows: %w", err)
	}
	out := make([]*WorkflowRecord, 0, len(wants))
	for i, w := range wants {
		rec, err := workflowRecord(w.id, w.n, recs[i].Val())
		if errors.Is(err, ErrNotFound) {
			// Pruned by puts between the two reads: read the new latest.
			rec, err = r.GetWorkflow(ctx, w.id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b *WorkflowRecord) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
