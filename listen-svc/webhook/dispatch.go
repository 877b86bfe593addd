package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/tracing"
)

// Dispatcher hands a created run to whatever drives it.
type Dispatcher interface {
	// Dispatch returns once the driver has taken the run (not when the run
	// ends). An error means the run was not handed over.
	Dispatch(ctx context.Context, runID string) error
}

// Agent hands runs to agent-svc: one detached DriveRun stream per run,
// attached by run id. The handover counts once agent-svc sends its first
// event (queued for a drive slot, or started); a refusal or a broken call
// is a failed handover. The drive is then agent-svc's: the stream is read
// in the background, each printed line going to Transcript, and closing it
// (Close, a restart of this process) stops only the transcript, never the
// drive.
type Agent struct {
	client  realmv1.AgentServiceClient
	options *realmv1.DriveOptions
	caller  *realmv1.Caller

	// Transcript receives the drives' printed lines (nil: discarded).
	Transcript io.Writer
	// FirstEvent bounds the wait for agent-svc's first event.
	FirstEvent time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	live   map[string]bool
	outMu  sync.Mutex
}

// NewAgent returns a dispatcher over client. options are the drive flags
// (--provider, --model, --llm-timeout) every run gets.
func NewAgent(client realmv1.AgentServiceClient, options *realmv1.DriveOptions, caller *realmv1.Caller) *Agent {
	ctx, cancel := context.WithCancel(context.Background())
	return &Agent{client: client, options: options, caller: caller, FirstEvent: 30 * time.Second,
		ctx: ctx, cancel: cancel, live: map[string]bool{}}
}

// Dispatch implements Dispatcher.
func (a *Agent) Dispatch(ctx context.Context, runID string) error {
	// The drive outlives the request: its context is the dispatcher's,
	// carrying on the request's trace.
	dctx, cancel := context.WithCancel(tracing.Continue(a.ctx, ctx))
	stream, err := a.client.DriveRun(dctx, &realmv1.DriveRunRequest{RunId: runID, Options: a.options, Caller: a.caller, Detach: true})
	if err != nil {
		cancel()
		return fmt.Errorf("agent-svc: %w", err)
	}
	type first struct {
		ev  *realmv1.DriveEvent
		err error
	}
	got := make(chan first, 1)
	go func() {
		resp, err := stream.Recv()
		got <- first{resp.GetEvent(), err}
	}()
	var f first
	select {
	case f = <-got:
	case <-time.After(a.FirstEvent):
		cancel()
		return fmt.Errorf("agent-svc did not take the run within %s", a.FirstEvent)
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
	if f.err != nil {
		cancel()
		return fmt.Errorf("agent-svc: %w", f.err)
	}
	a.print(f.ev)
	if f.ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED &&
		f.ev.GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED {
		cancel()
		return errors.New(linesText(f.ev))
	}
	a.mu.Lock()
	a.live[runID] = true
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancel()
		defer func() {
			a.mu.Lock()
			delete(a.live, runID)
			a.mu.Unlock()
		}()
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			a.print(resp.GetEvent())
		}
	}()
	return nil
}

// Live are the runs whose drive this process still follows.
func (a *Agent) Live() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.live))
	for id := range a.live {
		out = append(out, id)
	}
	return out
}

// Close stops following every drive (agent-svc goes on with them) and
// waits for the readers.
func (a *Agent) Close() {
	a.cancel()
	a.wg.Wait()
}

// Wait waits until every drive held has ended by itself.
func (a *Agent) Wait() { a.wg.Wait() }

func (a *Agent) print(ev *realmv1.DriveEvent) {
	if a.Transcript == nil || len(ev.GetLines()) == 0 {
		return
	}
	a.outMu.Lock()
	defer a.outMu.Unlock()
	for _, l := range ev.GetLines() {
		_, _ = io.WriteString(a.Transcript, l.GetText()+"\n")
	}
}

func linesText(ev *realmv1.DriveEvent) string {
	var parts []string
	for _, l := range ev.GetLines() {
		if t := strings.TrimSpace(l.GetText()); t != "" {
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return "agent-svc refused the drive"
	}
	return strings.Join(parts, " ")
}
