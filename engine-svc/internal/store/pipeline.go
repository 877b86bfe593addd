package store

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// commitPipe sends the commit scripts of concurrent commits together: one
// pipeline of EVALSHAs (one write and one read on one connection) instead
// of a round trip each, so the system calls and Redis's own per-command
// I/O are shared. Each script still runs alone and atomically on the
// server; only the transport is shared.
//
// There is no sender goroutine: the first commit to arrive while none is
// being sent leads — it sends itself and whatever queued behind it, then
// hands the lead to the oldest commit that queued meanwhile. One batch is
// in flight at a time: the commits that arrive during it are the next
// batch, so batches grow with load and a lone commit goes out at once.
type commitPipe struct {
	c redis.UniversalClient

	mu      sync.Mutex
	queue   []*pipedCommit
	spare   []*pipedCommit // the last batch's array, for the next queue
	sending bool           // a leader is sending a batch
}

// notSentError is a commit withdrawn from the queue before any byte of it
// was sent: its outcome is known (nothing was written).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// pipedCommit is one commit waiting for, or in, a batch.
type pipedCommit struct {
	cmd []any // EVALSHA of the commit script
	res any
	err error
	// ready is signalled at most once per commit (a first leader's never):
	// the result is set, or (lead) the commit
	// is to send the next batch.
	ready chan struct{}
	lead  bool // under commitPipe.mu
	taken bool // in a batch being sent; under commitPipe.mu
}

// pipedCommits holds pipedCommits between commits. One goes back once its
// caller has its result: by then every signal meant for it was received
// (each is sent once and waited for), and no batch or queue holds it.
var pipedCommits = sync.Pool{New: func() any { return &pipedCommit{ready: make(chan struct{}, 1)} }}

// release clears the commit (its channel kept, empty) and pools it.
func (pc *pipedCommit) release() {
	*pc = pipedCommit{ready: pc.ready}
	pipedCommits.Put(pc)
}

// run sends cmd, an EVALSHA of the commit script, and returns its reply.
// A caller whose ctx ends while its commit is still queued withdraws it
// (it was never sent); once taken into a batch it waits for the batch,
// which the client's own timeouts bound.
func (p *commitPipe) run(ctx context.Context, cmd []any) (any, error) {
	pc := pipedCommits.Get().(*pipedCommit)
	pc.cmd = cmd
	defer pc.release()
	p.mu.Lock()
	p.queue = append(p.queue, pc)
	leads := !p.sending
	if leads {
		p.sending, pc.lead = true, true
	}
	p.mu.Unlock()
	if !leads {
		select {
		case <-pc.ready:
		case <-ctx.Done():
			p.mu.Lock()
			if !pc.taken && !pc.lead {
				p.queue = slices.DeleteFunc(p.queue, func(q *pipedCommit) bool { return q == pc })
				p.mu.Unlock()
				return nil, &notSentError{ctx.Err()}
			}
			p.mu.Unlock()
			<-pc.ready
		}
		if !pc.lead { // set before ready was signalled
			return pc.res, pc.err
		}
	}
	p.lead(ctx, pc)
	return pc.res, pc.err
}

// lead sends every queued commit as one batch, sets each one's result,
// then hands the lead on (or ends it when nothing queued meanwhile).
func (p *commitPipe) lead(ctx context.Context, self *pipedCommit) {
	p.mu.Lock()
	batch := p.queue
	p.queue, p.spare = p.spare, nil
	for _, pc := range batch {
		pc.taken = true
	}
	p.mu.Unlock()

	// The batch carries other callers' commits: one caller giving up must
	// not fail them.
	p.send(context.WithoutCancel(ctx), batch)

	p.mu.Lock()
	if len(p.queue) > 0 {
		next := p.queue[0]
		next.lead = true
		next.ready <- struct{}{}
	} else {
		p.sending = false
	}
	p.mu.Unlock()
	for _, pc := range batch {
		if pc != self {
			pc.ready <- struct{}{}
		}
	}
	clear(batch)
	p.mu.Lock()
	p.spare = batch[:0]
	p.mu.Unlock()
}

// send runs the batch's scripts: a lone commit as a plain script call, more
// as one pipeline. A script missing from the server's cache (a restart, a
// SCRIPT FLUSH) is sent again with its body.
func (p *commitPipe) send(ctx context.Context, batch []*pipedCommit) {
	if len(batch) == 1 {
		pc := batch[0]
		pc.res, pc.err = evalCommit(ctx, p.c, pc.cmd)
		return
	}
	pipe := p.c.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, pc := range batch {
		cmds[i] = pipe.Do(ctx, pc.cmd...)
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	for i, pc := range batch {
		pc.res, pc.err = cmds[i].Result()
		if isNoScript(pc.err) {
			pc.res, pc.err = p.c.Do(ctx, asEval(pc.cmd)...).Result()
		}
	}
}
