// Package server is agent-svc's gRPC face: DriveRun checks the drive's
// flags, picks the model provider, waits for a slot under the global drive
// limit, and streams the drive's events.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/agent-svc/internal/drive"
	"github.com/realm-go/realm/agent-svc/internal/durable"
	"github.com/realm-go/realm/agent-svc/internal/limit"
	"github.com/realm-go/realm/agent-svc/internal/provider"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Config is what the service needs.
type Config struct {
	Engine realmv1.EngineServiceClient
	// Registry, when set, warns a new run's drive of the handlers and
	// adapters no live runner offers (engine-svc's RegistryService).
	Registry realmv1.RegistryServiceClient
	Services provider.Services
	Limiter  limit.Limiter
	// GatePoll and InFlightWait tune the drive's waits (0: defaults).
	GatePoll     time.Duration
	InFlightWait time.Duration
	Logger       *slog.Logger
	// Track, when set, is told +1 when a drive takes its slot and -1 when
	// it gives it back.
	Track func(delta int)
	// Metrics, when set, receives drive counts, failures and slots in use.
	Metrics prometheus.Registerer
	// Book, when set, keeps detached drives in Redis so another agent-svc
	// takes them up if this one dies (Pickup).
	Book *durable.Book
	// AllowBaseURLs are the base URLs (and the paths below them) a drive
	// may name in its options besides the providers' official endpoints
	// and Services' own base URLs (--allow-base-url). A drive naming any
	// other is refused before a key is used.
	AllowBaseURLs provider.Allowlist
	// Environ is the environment drives expand '${NAME}' in mcp_servers
	// from and redact from tool results (NAME=value; nil: the process's).
	Environ []string
	// ToolEnv are the only variables '${NAME}' in mcp_servers may read
	// (--tool-env); nil: any but agent-svc's own credentials.
	ToolEnv []string
}

// Server implements realmv1.AgentServiceServer.
type Server struct {
	realmv1.UnimplementedAgentServiceServer
	c Config
	m *driveMetrics
	// allow is every base URL a drive may name.
	allow provider.Allowlist
	// life ends detached drives: Stop cancels it when shutdown's grace
	// is spent.
	life context.Context
	stop context.CancelFunc
	// picked are the drives Pickup took up, which no gRPC call waits for.
	picked sync.WaitGroup
}

// New returns the service. A nil Limiter is a local limit of 8.
func New(c Config) *Server {
	if c.Limiter == nil {
		c.Limiter = limit.NewLocal(8)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	life, stop := context.WithCancel(context.Background())
	allow := c.AllowBaseURLs.With(append([]string{c.Services.OpenAI.BaseURL, c.Services.Anthropic.BaseURL}, provider.Official...)...)
	return &Server{c: c, m: newDriveMetrics(c.Metrics), allow: allow, life: life, stop: stop}
}

// Stop ends the detached drives still going (their runs stay open for the
// next drive, and with a Book stay owed) and waits for the ones Pickup
// took up. gRPC's GracefulStop waits for the others first, as for any
// drive.
func (s *Server) Stop() {
	s.stop()
	s.picked.Wait()
}

// DriveRun implements realmv1.AgentServiceServer.
func (s *Server) DriveRun(req *realmv1.DriveRunRequest, stream realmv1.AgentService_DriveRunServer) error {
	ctx := stream.Context()
	send := func(ev *realmv1.DriveEvent) error {
		return stream.Send(&realmv1.DriveRunResponse{Event: ev})
	}
	if !req.GetDetach() {
		return s.drive(ctx, req, false, send)
	}
	// The drive is this service's: the caller leaving stops only the
	// events (the context keeps its values, such as the trace).
	follow := send
	return s.detached(context.WithoutCancel(ctx), req, "", func(ev *realmv1.DriveEvent) error {
		_ = follow(ev) // an error is the caller gone: the drive goes on
		return nil
	})
}

// detached runs a drive that is this service's own: it ends with the run,
// a block, or Stop. With a Book it is written down as wanted (once its run
// is known) under a lease renewed while it drives, so if this process dies
// another agent-svc takes the run up (Pickup); run is set when the lease
// is already held (a pickup).
func (s *Server) detached(ctx context.Context, req *realmv1.DriveRunRequest, run string, send drive.Emit) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	if s.c.Book == nil {
		return s.drive(ctx, req, true, send)
	}
	b := &booking{s: s, req: req, cancel: cancel}
	if run != "" {
		b.held(run)
	}
	defer b.end()
	return s.drive(ctx, req, true, func(ev *realmv1.DriveEvent) error {
		if b.run == "" && ev.GetRunId() != "" {
			b.want(ev.GetRunId())
		}
		return send(ev)
	})
}

// drive runs one drive, sending its events. A durable drive is one this
// service owns (detached): it waits out an unreachable engine
// (drive.Options.Durable).
func (s *Server) drive(ctx context.Context, req *realmv1.DriveRunRequest, durable bool, emit drive.Emit) error {
	send := func(ev *realmv1.DriveEvent) error {
		s.m.event(ev)
		return emit(ev)
	}
	o := req.GetOptions()
	retries := drive.DefaultSchemaRetries
	if o.SchemaRetries != nil {
		retries = int(o.GetSchemaRetries())
	}
	if retries < 0 {
		return refuse(send, "error: option '--schema-retries <n>' argument '%d' is invalid. --schema-retries must be a non-negative integer.", retries)
	}
	if o.GetLlmTimeoutSeconds() < 0 {
		return refuse(send, "error: option '--llm-timeout <seconds>' argument '%d' is invalid. --llm-timeout must be a positive integer number of seconds.", o.GetLlmTimeoutSeconds())
	}
	// Before anything else uses a key: agent-svc's keys go to the base URL
	// the drive names, so only allowed ones may be named.
	if b := o.GetBaseUrl(); b != "" && !s.allow.Allows(b) {
		s.c.Logger.Warn("drive refused: base URL not allowed", "base_url", b)
		return refuse(send, "%s", provider.RefuseBaseURL(b))
	}
	p, warnings, err := provider.Choose(s.c.Services, provider.Choice{
		Provider: o.GetProvider(), Model: o.GetModel(), BaseURL: o.GetBaseUrl(), StrictBaseURL: o.GetStrictBaseUrl(),
	})
	if err != nil {
		return refuse(send, "%s", err.Error())
	}
	slot := &slotHolder{lim: s.c.Limiter, queued: func(ahead int) {
		_ = send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_QUEUED, QueuePosition: int32(ahead),
			Lines: stderrLine("… waiting for a drive slot (the drive limit is reached)")})
	}, held: func(delta int) {
		s.m.slot(delta)
		if s.c.Track != nil {
			s.c.Track(delta)
		}
	}}
	if _, err := slot.Hold(ctx); err != nil {
		return err
	}
	defer slot.Park()
	per := time.Duration(o.GetLlmTimeoutSeconds()) * time.Second
	return drive.Run(ctx, s.c.Engine, req, drive.Options{
		Provider: p, Model: o.GetModel(), SchemaRetries: retries, PerAttempt: per,
		PromptCache: o.GetPromptCache(), MintWriterNonce: o.GetMintWriterNonce(),
		GatePoll: s.c.GatePoll, InFlightWait: s.c.InFlightWait, Caller: req.GetCaller(), Warnings: warnings, Registry: s.c.Registry, Slot: slot,
		Durable: durable, Environ: s.c.Environ, ToolEnv: s.c.ToolEnv,
		Flags: drive.Flags{Provider: o.GetProvider(), Model: o.GetModel(), BaseURL: o.GetBaseUrl(), StrictBaseURL: o.GetStrictBaseUrl(),
			SchemaRetries: retries, LLMTimeoutSeconds: int(o.GetLlmTimeoutSeconds()), PromptCache: o.GetPromptCache(), MintWriterNonce: o.GetMintWriterNonce()},
	}, func(ev *realmv1.DriveEvent) error {
		if f := ev.GetFailure(); f != nil {
			// Until the engine can record drive failures on the run, the
			// service's log keeps them.
			s.c.Logger.Warn("drive failure", "run_id", ev.GetRunId(), "step", f.GetStep(), "provider", f.GetProvider(),
				"error_class", f.GetErrorClass(), "message", f.GetMessage(), "status", f.GetLastObservedStatus())
		}
		return send(ev)
	})
}

// slotHolder is one drive's slot under the limit: taken before the drive
// starts, parked while it waits on a person, taken again before its next
// model call, and replaced when lost. One drive's goroutine uses it.
type slotHolder struct {
	lim    limit.Limiter
	queued func(ahead int)
	held   func(delta int) // metrics and Track: +1 when taken, -1 when given back

	slot   *limit.Slot
	once   bool // a slot was held before: the drive is under way
	ctx    context.Context
	cancel context.CancelFunc
	watch  chan struct{} // closed when the watcher of slot.Lost ends
}

// Hold implements drive.Slot.
func (h *slotHolder) Hold(ctx context.Context) (context.Context, error) {
	if h.slot != nil {
		select {
		case <-h.slot.Lost():
			h.Park() // give up what is left of it, then queue again
		default:
			return h.ctx, nil
		}
	}
	acquire := h.lim.Acquire
	if h.once {
		acquire = h.reacquire
	}
	s, err := acquire(ctx, h.queued)
	if err != nil {
		return nil, err
	}
	h.slot, h.once = s, true
	h.ctx, h.cancel = context.WithCancel(ctx)
	h.watch = make(chan struct{})
	go func(c context.Context, cancel context.CancelFunc, done chan struct{}) {
		defer close(done)
		select {
		case <-s.Lost():
			cancel() // cut the model call in flight: the slot may be another drive's now
		case <-c.Done():
		}
	}(h.ctx, h.cancel, h.watch)
	h.held(1)
	return h.ctx, nil
}

// reacquire takes a slot again in the middle of a drive. A limiter whose
// store does not answer (a Redis restart or failover, a reply past its
// timeout) is waited out with backoff until ctx ends: the run is open and
// its next model call is owed, so a blip must not end the drive. (The
// first slot is taken without this: a drive that cannot start says so.)
func (h *slotHolder) reacquire(ctx context.Context, queued func(int)) (*limit.Slot, error) {
	wait := 100 * time.Millisecond
	for {
		s, err := h.lim.Acquire(ctx, queued)
		if err == nil || ctx.Err() != nil {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// Park implements drive.Slot.
func (h *slotHolder) Park() {
	if h.slot == nil {
		return
	}
	h.cancel()
	<-h.watch
	h.held(-1) // before the release: the slot may be taken at once
	h.slot.Release()
	h.slot = nil
}

func stderrLine(text string) []*realmv1.DriveLine {
	return []*realmv1.DriveLine{{Text: text, Stream: realmv1.DriveStream_DRIVE_STREAM_STDERR}}
}

// refuse ends a drive that never started: one FINISHED event.
func refuse(send func(*realmv1.DriveEvent) error, format string, args ...any) error {
	return send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED,
		Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED, ExitCode: 1, Lines: stderrLine(fmt.Sprintf(format, args...))})
}
