package enginetest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// Raw reaches past the engine into its store, for tests that need what
// only a crash, an old release or a hand in redis-cli leaves behind (the
// maintenance commands' residue). Nothing here goes through the engine's
// write path, on purpose.
type Raw struct {
	st *store.Redis
	rc redis.UniversalClient
}

// DropRunDocument deletes a run's document only, leaving its outputs,
// evidence, index entries and idempotency key: run-less residue.
func (r *Raw) DropRunDocument(ctx context.Context, runID string) error {
	return r.rc.Del(ctx, r.st.RunKey(runID)).Err()
}

// EditRunDocument rewrites a run's stored document in place, leaving its
// version as it was (as an older release wrote it).
func (r *Raw) EditRunDocument(ctx context.Context, runID string, edit func(doc map[string]any)) error {
	raw, err := r.rc.HGet(ctx, r.st.RunKey(runID), "doc").Result()
	if err != nil {
		return fmt.Errorf("read run %s: %w", runID, err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return err
	}
	edit(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return r.rc.HSet(ctx, r.st.RunKey(runID), "doc", b).Err()
}

// RunDocument returns a run's stored version and document.
func (r *Raw) RunDocument(ctx context.Context, runID string) (int64, map[string]any, error) {
	snap, err := r.st.LoadRun(ctx, runID)
	if err != nil {
		return 0, nil, err
	}
	var doc map[string]any
	err = json.Unmarshal(snap.Doc, &doc)
	return snap.Version, doc, err
}

// EditWorkflow rewrites the latest stored version of a workflow in place.
func (r *Raw) EditWorkflow(ctx context.Context, id string, edit func(def map[string]any)) error {
	rec, err := r.st.GetWorkflow(ctx, id)
	if err != nil {
		return err
	}
	var def map[string]any
	if err := json.Unmarshal(rec.Definition, &def); err != nil {
		return err
	}
	edit(def)
	b, err := json.Marshal(def)
	if err != nil {
		return err
	}
	return r.rc.HSet(ctx, r.st.Prefix()+":wf:"+id, fmt.Sprintf("v%d", rec.Version), b).Err()
}

// PointKey points a workflow's idempotency key at a run, bypassing the
// engine (a pointer left stale by hand or by an older release).
func (r *Raw) PointKey(ctx context.Context, workflowID, key, runID string) error {
	return r.rc.Set(ctx, r.st.IdemKeyName(workflowID+"\x1f"+key), runID, 0).Err()
}

// Redis is the client of the engine's store, for a test that reads what
// the engine keeps (notify-svc reads the gate outbox).
func (r *Raw) Redis() redis.UniversalClient { return r.rc }

// Prefix is the engine store's key prefix.
func (r *Raw) Prefix() string { return r.st.Prefix() }
