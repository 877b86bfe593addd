package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// progressEvery is how often a long batch walk reports on stderr.
const progressEvery = 2 * time.Second

// batchStream opens one of the engine's batch streams (DrainRuns,
// PurgeRuns) and returns its next-event function.
type batchStream func(context.Context, realmv1.EngineServiceClient) (func() (*realmv1.OperatorEvent, error), error)

// events adapts a batch stream whose responses each carry one event.
func events[R any, PR interface {
	*R
	GetEvent() *realmv1.OperatorEvent
}](s grpc.ServerStreamingClient[R], err error) (func() (*realmv1.OperatorEvent, error), error) {
	if err != nil {
		return nil, err
	}
	return func() (*realmv1.OperatorEvent, error) {
		r, err := s.Recv()
		if err != nil {
			return nil, err
		}
		return PR(r).GetEvent(), nil
	}, nil
}

// readBatch runs a batch act: each selected run goes to onItem as the
// engine streams it, a progress line goes to stderr at most every
// progressEvery (and one when a walk of several pages ends), and the summary is
// returned. The walk has no overall deadline — a large store takes as long
// as it takes — but the engine must send something within --timeout, and
// it sends progress after every page.
func (a *app) readBatch(ctx context.Context, open batchStream, onItem func(*realmv1.OperatorItem)) (*realmv1.OperatorSummary, error) {
	engine, closeConn, err := a.engine(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := fmt.Errorf("engine-svc at %s sent nothing for %s", a.engineAddr(), a.timeout)
	timer := time.AfterFunc(a.timeout, func() { cancel(idle) })
	defer timer.Stop()
	next, err := open(sctx, engine)
	if err != nil {
		return nil, a.rpcError(err)
	}
	last := a.env.Now()
	for {
		ev, err := next()
		if err != nil {
			if errors.Is(context.Cause(sctx), idle) {
				return nil, &exitError{code: ExitUnreachable, msg: "Error: " + idle.Error()}
			}
			if errors.Is(err, io.EOF) {
				return nil, refuse("Error: engine-svc ended the stream without a summary.")
			}
			return nil, a.rpcError(err)
		}
		timer.Reset(a.timeout)
		switch e := ev.GetEvent().(type) {
		case *realmv1.OperatorEvent_Item:
			onItem(e.Item)
		case *realmv1.OperatorEvent_Progress:
			if now := a.env.Now(); now.Sub(last) >= progressEvery {
				last = now
				p := e.Progress
				fmt.Fprintf(a.env.Stderr, "… %d run(s) read so far, %d selected, %d done\n", p.GetScanned(), p.GetSelected(), p.GetDone())
			}
		case *realmv1.OperatorEvent_Summary:
			s := e.Summary
			reportWalk(a.env.Stderr, int64(s.GetScanned()), int64(s.GetPages()), int64(s.GetLargestPage()))
			return s, nil
		}
	}
}

// kb is a size in whole kilobytes, rounded up.
func kb(n int64) int64 { return (n + 1023) / 1024 }

// walkReportFrom is how many runs a walk reads before it says how long it
// was: more than one page of the engine's default walk (200). The page
// count alone would not do: on Redis a page is what one SCAN returned, so
// two runs among many other keys can take two pages.
const walkReportFrom = 200

// reportWalk says how long a walk of the store was, when it was long.
func reportWalk(w io.Writer, scanned, pages, largest int64) {
	if scanned <= walkReportFrom || pages <= 1 {
		return
	}
	fmt.Fprintf(w, "Walked the store: %d run(s) read in %d page(s) of at most %d.\n", scanned, pages, largest)
}
