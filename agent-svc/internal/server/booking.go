package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/realm-go/realm/agent-svc/internal/durable"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// booking is one detached drive's entry in the Book: wanted once its run is
// known, its lease renewed until the drive ends.
type booking struct {
	s      *Server
	req    *realmv1.DriveRunRequest
	cancel context.CancelFunc // the drive's: a lease lost to another process ends it

	run       string
	stopRenew context.CancelFunc
	renewing  chan struct{}
}

// want writes the run down as owed a drive, with the request that attaches
// to it, and holds its lease.
func (b *booking) want(run string) {
	again := proto.Clone(b.req).(*realmv1.DriveRunRequest)
	// Creation-only fields go: the owed drive attaches to the run, whose
	// definition was chosen when it was created.
	again.WorkflowId, again.WorkflowSource, again.Params, again.Register, again.RunId, again.Detach = "", nil, nil, false, run, true
	raw, err := proto.Marshal(again)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var took bool
		took, err = b.s.c.Book.Want(ctx, run, raw)
		cancel()
		if err == nil && !took {
			b.s.c.Logger.Warn("drive: another agent-svc holds this run's lease", "run_id", run)
		}
	}
	if err != nil {
		// The drive goes on; it is only not picked up if this process dies.
		b.s.c.Logger.Warn("drive: could not write the drive down as owed", "run_id", run, "err", err)
		return
	}
	b.held(run)
}

// held starts renewing the lease on run, which this process holds.
func (b *booking) held(run string) {
	b.run = run
	ctx, stop := context.WithCancel(context.Background())
	b.stopRenew, b.renewing = stop, make(chan struct{})
	book := b.s.c.Book
	go func() {
		defer close(b.renewing)
		t := time.NewTicker(book.TTL() / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, book.TTL()/3)
			err := book.Renew(rctx, run)
			cancel()
			if errors.Is(err, durable.ErrLeaseLost) {
				b.s.c.Logger.Warn("drive: lease lost; another agent-svc drives the run now", "run_id", run)
				b.cancel()
				return
			}
		}
	}()
}

// end settles the book when the drive ends: a drive stopped by shutdown
// gives its lease up and stays owed (another agent-svc goes on with it at
// once); any other end (the run ended, the drive blocked or was refused)
// removes it.
func (b *booking) end() {
	if b.run == "" {
		return
	}
	b.stopRenew()
	<-b.renewing
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if b.s.life.Err() != nil {
		err = b.s.c.Book.Release(ctx, b.run)
	} else {
		err = b.s.c.Book.Done(ctx, b.run)
	}
	if err != nil {
		b.s.c.Logger.Warn("drive: could not settle the drive's entry", "run_id", b.run, "err", err)
	}
}

// Pickup takes up, every interval until ctx ends, the owed drives no
// agent-svc holds a lease on (their process died or shut down), and drives
// each here, detached. The caller owns it.
func (s *Server) Pickup(ctx context.Context, every time.Duration) {
	if s.c.Book == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runs, err := s.c.Book.Wanted(ctx, 100)
		if err != nil {
			s.c.Logger.Warn("drive pickup: could not read the owed drives", "err", err)
			continue
		}
		for _, run := range runs {
			if took, err := s.c.Book.Take(ctx, run); err != nil || !took {
				continue
			}
			raw, err := s.c.Book.Request(ctx, run)
			req := &realmv1.DriveRunRequest{}
			if err == nil {
				err = proto.Unmarshal(raw, req)
			}
			if err != nil {
				s.c.Logger.Warn("drive pickup: the owed drive's request cannot be read; dropped", "run_id", run, "err", err)
				_ = s.c.Book.Done(ctx, run)
				continue
			}
			s.c.Logger.Info("drive pickup: taking up an owed drive", "run_id", run)
			s.picked.Add(1)
			go func() {
				defer s.picked.Done()
				_ = s.detached(context.Background(), req, run, func(*realmv1.DriveEvent) error { return nil })
			}()
		}
	}
}
