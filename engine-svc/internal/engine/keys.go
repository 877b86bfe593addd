package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ReconcileKeys rebuilds the idempotency-key pointers from the run records
// (cli spec §4.10): a key group is one key within one workflow, and its
// pointer names the newest run holding the key. Each pointer is written
// only if it still holds what was read, so a run created meanwhile under
// the key keeps it.
func (e *Engine) ReconcileKeys(ctx context.Context, req *realmv1.ReconcileKeysRequest) (*realmv1.ReconcileKeysResponse, error) {
	m, runs, err := e.maintainedRuns(ctx)
	if err != nil {
		return nil, err
	}
	type group struct{ workflow, key string }
	groups := map[group][]*record.Run{}
	for _, s := range runs {
		r := s.run
		if r.IdempotencyKey == "" || (req.GetWorkflowId() != "" && r.WorkflowID != req.GetWorkflowId()) {
			continue
		}
		g := group{r.WorkflowID, r.IdempotencyKey}
		groups[g] = append(groups[g], r)
	}
	order := make([]group, 0, len(groups))
	for g := range groups {
		order = append(order, g)
	}
	slices.SortFunc(order, func(a, b group) int {
		return cmp.Or(strings.Compare(a.workflow, b.workflow), strings.Compare(a.key, b.key))
	})
	resp := &realmv1.ReconcileKeysResponse{Groups: int32(len(order))}
	for _, g := range order {
		members := groups[g]
		slices.SortFunc(members, func(a, b *record.Run) int { // newest first
			return cmp.Or(strings.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(b.ID, a.ID))
		})
		canonical := members[0].ID
		if len(members) > 1 {
			d := &realmv1.DuplicateKeyGroup{WorkflowId: g.workflow, Key: g.key, Canonical: canonical}
			for _, o := range members[1:] {
				d.Others = append(d.Others, o.ID)
			}
			resp.Duplicates = append(resp.Duplicates, d)
		}
		full := keyOf(g.workflow, g.key)
		held, err := e.st.LookupKey(ctx, full)
		if err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read idempotency key: "+err.Error())
		}
		if held == canonical {
			resp.Current++
			continue
		}
		if req.GetDryRun() {
			resp.Written++
			continue
		}
		ok, err := m.PointKey(ctx, full, canonical, held)
		if err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to write idempotency key: "+err.Error())
		}
		if ok {
			resp.Written++
		}
	}
	return resp, nil
}

// MigrateWorkflows adds origin "human" to every stored copy of a workflow
// that lacks an origin (cli spec §2.8). Every stored version is brought up
// to date, in place; a workflow counts as migrated when any of its
// versions was. Idempotent.
func (e *Engine) MigrateWorkflows(ctx context.Context, _ *realmv1.MigrateWorkflowsRequest) (*realmv1.MigrateWorkflowsResponse, error) {
	m, err := e.maintenance()
	if err != nil {
		return nil, err
	}
	recs, err := e.st.ListWorkflows(ctx)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to list workflows: "+err.Error())
	}
	resp := &realmv1.MigrateWorkflowsResponse{}
	for _, latest := range recs {
		// Pruned versions are gone: start at the oldest one kept.
		oldest, err := m.OldestWorkflowVersion(ctx, latest.ID)
		if err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read workflow: "+err.Error())
		}
		migrated := false
		for v := oldest; v <= latest.Version; v++ {
			rec, err := e.st.GetWorkflowVersion(ctx, latest.ID, v)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read workflow: "+err.Error())
			}
			next, ok := withOrigin(rec.Definition)
			if !ok {
				continue
			}
			done, err := m.RewriteWorkflowVersion(ctx, rec.ID, rec.Version, rec.Definition, next)
			if err != nil {
				return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to store workflow: "+err.Error())
			}
			migrated = migrated || done
		}
		if migrated {
			resp.Migrated++
			e.defs.drop(latest.ID)
		} else {
			resp.UpToDate++
		}
	}
	return resp, nil
}

// withOrigin returns the definition with origin "human" added, and false
// when it already has one (or cannot be read: workflow list reports
// those).
func withOrigin(def []byte) ([]byte, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(def, &fields) != nil || fields == nil {
		return nil, false
	}
	if o, ok := fields["origin"]; ok && string(o) != `""` && string(o) != "null" {
		return nil, false
	}
	fields["origin"] = json.RawMessage(`"human"`)
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, false
	}
	return b, true
}
