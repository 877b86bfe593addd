package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
)

// DefaultPackAfter is how long an ended run that owes nothing stays as
// it was written before SweepPack packs it (Options.PackAfter): a run is
// most often read just after it ends (its reply, get_run_state, an
// export), and a packed run is inflated on every read.
const DefaultPackAfter = time.Minute

// NoPacking as Options.PackAfter turns packing off: SweepPack packs
// nothing, and ended runs wait in store.IndexPack until it is on.
const NoPacking time.Duration = -1

// packPages bounds the pages of SweepPack one sweeper turn makes.
const packPages = 20

// SweepPack packs up to limit ended runs that have owed nothing for the
// pack delay (store.IndexPack): their outputs and evidence fold into one
// compressed field of the run hash, about a fifth of the memory. Packing
// changes no version and nothing a reader sees. A run written meanwhile is
// left for its next turn (its commit scored it again, or took it out of
// the index). It returns how many runs it packed.
func (e *Engine) SweepPack(ctx context.Context, limit int) (int, error) {
	if e.packAfter < 0 {
		return 0, nil
	}
	upTo := e.now().Add(-e.packAfter)
	due, err := e.st.Due(ctx, store.IndexPack, float64(upTo.UnixMilli()), limit)
	if err != nil {
		return 0, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to list runs to pack: "+err.Error())
	}
	n := 0
	for _, id := range due {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		packed, err := e.st.PackRun(ctx, id)
		switch {
		case err == nil:
			if packed {
				n++
			}
		case store.IsConflict(err), errors.Is(err, store.ErrNotFound):
			// Moved since it was scored, or deleted (DeleteRun leaves no
			// member behind; `realm run gc` reaps one that outlived its run).
		default:
			e.log.WarnContext(ctx, "could not pack an ended run; it stays as written", "run_id", id, slog.Any("err", err))
		}
	}
	return n, nil
}
