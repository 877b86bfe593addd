package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// GcFloor is the youngest residue gc may reap (cli spec §4.9).
const GcFloor = time.Hour

// maintenance returns the store's maintenance side, or says this store
// cannot be maintained.
func (e *Engine) maintenance() (store.Maintenance, error) {
	m, ok := e.st.(store.Maintenance)
	if !ok {
		return nil, errcode.New(errcode.EngineStoreFailed, "This store does not support maintenance (scanning runs by key); nothing was done.")
	}
	return m, nil
}

// storedRun is a run document decoded for a maintenance pass.
type storedRun struct {
	run *record.Run
	// storedPhase is run_phase as the document says it.
	storedPhase string
	// packed: the run is stored packed, so out of store.IndexPack.
	packed bool
}

// maintainedRuns is the store's maintenance side and every stored run,
// decoded: what reconcile and stamp-seals start from.
func (e *Engine) maintainedRuns(ctx context.Context) (store.Maintenance, []storedRun, error) {
	m, err := e.maintenance()
	if err != nil {
		return nil, nil, err
	}
	runs, err := e.scanRuns(ctx, m)
	return m, runs, err
}

// scanRuns decodes every stored run. One unreadable document stops the
// pass: deciding about the rest while one record is unknown would report
// a store as clean that is not (cli spec §4.9: one unparseable run file
// aborts heal).
func (e *Engine) scanRuns(ctx context.Context, m store.Maintenance) ([]storedRun, error) {
	docs, err := m.ScanRuns(ctx)
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read runs from store: "+err.Error())
	}
	return decodeStored(docs)
}

// decodeStored decodes stored run documents; one unreadable one is an
// error naming it.
func decodeStored(docs []store.StoredRun) ([]storedRun, error) {
	out := make([]storedRun, 0, len(docs))
	for _, d := range docs {
		var r record.Run
		if err := json.Unmarshal(d.Doc, &r); err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, fmt.Sprintf("Run %s has an unreadable document (%v); nothing was changed. Repair or remove it, then run this again.", d.ID, err))
		}
		stored := r.RunPhase
		r.Version = d.Version
		r.Normalize()
		out = append(out, storedRun{run: &r, storedPhase: stored, packed: d.Packed})
	}
	return out, nil
}

// gcPage is the default page of gc's walk over the store.
const gcPage = 500

// GcRuns sweeps run-less residue and, with heal, rewrites runs whose
// stored phase or index membership disagrees with the record (cli spec
// §4.9). Without force it only reports. Both walk the store a page at a
// time: only what they find (residue, stale runs) is kept, never the runs.
func (e *Engine) GcRuns(ctx context.Context, req *realmv1.GcRunsRequest) (*realmv1.GcRunsResponse, error) {
	m, err := e.maintenance()
	if err != nil {
		return nil, err
	}
	page := store.WalkPage(int(req.GetPageSize()), gcPage)
	resp := &realmv1.GcRunsResponse{}
	// Heal decides on every run first: an unreadable one stops the whole
	// call before the sweep deletes anything.
	var stale []string
	if req.GetHeal() {
		if stale, err = e.findStale(ctx, m, page, resp); err != nil {
			return nil, err
		}
	}
	if req.GetSweep() {
		if err := e.sweep(ctx, m, req, page, resp); err != nil {
			return nil, err
		}
	}
	if req.GetHeal() && req.GetForce() {
		e.heal(ctx, stale, resp)
	}
	return resp, nil
}

// countPage records one page of gc's walk.
func countPage(resp *realmv1.GcRunsResponse, n int) {
	resp.Pages++
	resp.LargestPage = max(resp.LargestPage, int32(n))
}

func (e *Engine) sweep(ctx context.Context, m store.Maintenance, req *realmv1.GcRunsRequest, page int, resp *realmv1.GcRunsResponse) error {
	cutoff := e.now().Add(-time.Duration(req.GetOlderThanSeconds()) * time.Second)
	err := m.EachResidue(ctx, page, func(found []store.Residue) error {
		for _, f := range found {
			// Age is known for evidence and the run indexes; a key whose
			// age is unknown is reaped whatever the threshold: writes are
			// atomic, so residue is never a write still in flight.
			if !f.At.IsZero() && f.At.After(cutoff) {
				continue
			}
			resp.Residue = append(resp.Residue, &realmv1.Residue{Kind: f.Kind, RunId: f.RunID, Key: f.Key})
			if !req.GetForce() {
				continue
			}
			ok, err := m.ReapResidue(ctx, f)
			switch {
			case err != nil:
				resp.ReapFailed++
				resp.Failures = append(resp.Failures, fmt.Sprintf("%s: %v", f.Key, err))
			case ok:
				resp.Reaped++
			default:
				resp.ReapGone++
			}
		}
		return nil
	})
	if err != nil {
		return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read the store: "+err.Error())
	}
	return nil
}

// findStale walks every stored run a page at a time and reports those
// whose stored run_phase, or membership of the run indexes, disagrees
// with what the record derives. It returns their ids (to heal) and stops
// at the first unreadable document.
func (e *Engine) findStale(ctx context.Context, m store.Maintenance, page int, resp *realmv1.GcRunsResponse) ([]string, error) {
	var ids []string
	err := m.EachRun(ctx, page, func(docs []store.StoredRun) error {
		countPage(resp, len(docs))
		resp.RunsScanned += int64(len(docs))
		runs, err := decodeStored(docs)
		if err != nil {
			return err
		}
		names := make([]string, len(runs))
		for i, s := range runs {
			names[i] = s.run.ID
		}
		members, err := m.IndexMembership(ctx, names)
		if err != nil {
			return errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read the run indexes: "+err.Error())
		}
		for _, s := range runs {
			if reasons, _ := staleness(s, members); len(reasons) > 0 {
				resp.Stale = append(resp.Stale, &realmv1.StaleRun{RunId: s.run.ID, Reasons: reasons})
				ids = append(ids, s.run.ID)
			}
		}
		return nil
	})
	var coded *errcode.Error
	if err != nil && !errors.As(err, &coded) {
		err = errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read runs from store: "+err.Error())
	}
	return ids, err
}

// heal rewrites each stale run through the write path, which recomputes
// its run_phase and index entries (bumping version and updated_at).
func (e *Engine) heal(ctx context.Context, stale []string, resp *realmv1.GcRunsResponse) {
	for _, id := range stale {
		_, err := e.update(ctx, id, func(t *txn) error {
			t.maint = true
			// The run index entry is set again whether or not it was
			// missing: a ZADD of the same score changes nothing.
			t.index = append(t.index, indexOp(store.IndexRuns, t.run.ID, record.ParseTime(t.run.CreatedAt)))
			t.touch() // written back unchanged: the write path fixes the rest
			return nil
		})
		e.runs.drop(id)
		switch {
		case errors.Is(err, errRunNotFound):
			resp.HealGone++
		case err != nil:
			resp.HealFailed++
			resp.Failures = append(resp.Failures, fmt.Sprintf("%s: %v", id, err))
		default:
			resp.Healed++
		}
	}
}

// staleness says how a stored run disagrees with what it derives, and
// whether it is missing from the run index.
func staleness(s storedRun, members map[string]map[string]bool) ([]string, bool) {
	r := s.run
	var reasons []string
	if p := r.Phase(); s.storedPhase != p {
		reasons = append(reasons, fmt.Sprintf("run_phase '%s' ≠ derived '%s'", s.storedPhase, p))
	}
	unindexed := !members[store.IndexRuns][r.ID]
	if unindexed {
		reasons = append(reasons, "missing from the run index")
	}
	// The timer indexes as the write path would set them now.
	want := appendTimerIndexes(nil, r, time.Time{}) // membership only: no score is compared
	var wrong []string
	for _, op := range want {
		if members[op.Index] == nil {
			continue // an index this store does not keep
		}
		remove := op.Remove || op.Index == store.IndexPack && s.packed // packing took it out
		if has := members[op.Index][r.ID]; has == remove {
			wrong = append(wrong, op.Index)
		}
	}
	if len(wrong) > 0 {
		slices.Sort(wrong)
		reasons = append(reasons, "wrong membership of "+strings.Join(wrong, ", "))
	}
	return reasons, unindexed
}
