// Package realmtest runs workflow tests offline: fixtures (canned params,
// service answers, agent answers and gate choices) against a workflow on an
// engine inside the test process, with a fresh in-memory store and no
// network beyond loopback. The workflow's own rules — order, schemas,
// conditions, guards, gates — run exactly as in production, because the
// engine is the production engine.
//
// Handlers run for real: pass a Go runner's registrations in
// Options.Handlers, or start runners yourself against Suite.Addr (that is
// what `realm workflow test --runner` does). Services never run: a fixture
// mocks each one it reaches, and an unmocked service fails the fixture.
//
// In `go test`:
//
//	func TestWorkflow(t *testing.T) {
//		realmtest.Run(t, "workflow.yaml", "fixtures", realmtest.Options{
//			Handlers: handlers.Registrations(),
//		})
//	}
package realmtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/realm-go/realm/engine-svc/inprocess"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/quote"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/source"
	"github.com/realm-go/realm/pkg/workflow"
)

// Options configure a Suite.
type Options struct {
	// Handlers are served by a runner inside this process.
	Handlers []runner.Registration
	// RegistrationTimeout bounds the wait for the runners to register what
	// the workflow needs (default 30s). A handler still missing then fails
	// the fixtures that reach it, with the engine's message.
	RegistrationTimeout time.Duration
	// StepTimeout bounds each fixture's run (default 60s).
	RunTimeout time.Duration
	// Logger receives the engine's and the runner's logs (default: none).
	Logger *slog.Logger
}

// Result is what one fixture did.
type Result struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	// Error is why it failed: its first line is the headline.
	Error string `json:"error,omitempty"`
	// RunID is the run the fixture drove (empty when none was created).
	RunID string `json:"run_id,omitempty"`
	// Phase is the phase the run ended in.
	Phase string `json:"phase,omitempty"`
	// Calls are the calls the mocked services received.
	Calls []MockCall `json:"calls,omitempty"`
}

// Suite is one workflow on an in-process engine, ready to run fixtures.
// Fixtures run one at a time (Run holds a lock); use one Suite per
// goroutine to run them in parallel.
type Suite struct {
	eng   *inprocess.Engine
	def   *workflow.Definition
	opts  Options
	mocks *mockAdapters

	runMu      sync.Mutex
	stopRunner context.CancelFunc
	runnerDone chan error
}

// callerName is the program name the test driver stamps on claims and evidence.
const callerName = "realm workflow test"

// Open loads the workflow at path (the file, or a folder with
// workflow.yaml), starts an engine with a fresh in-memory store, registers
// the workflow on it and serves the handlers and the service mocks.
func Open(ctx context.Context, path string, o Options) (*Suite, error) {
	if o.RegistrationTimeout <= 0 {
		o.RegistrationTimeout = 30 * time.Second
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	src, err := source.Read(path)
	if err != nil {
		return nil, err
	}
	def, rep := workflow.Load(src.GetYaml(), workflow.LoadOptions{Path: src.GetPath(), Files: src.GetFiles()})
	if def == nil || !rep.Valid {
		return nil, fmt.Errorf("the workflow does not load:\n%s", strings.TrimSpace(rep.Text()))
	}
	eng, err := inprocess.Start(inprocess.Options{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	s := &Suite{eng: eng, def: def, opts: o, mocks: &mockAdapters{services: map[string]string{}}}
	for name, svc := range def.Services {
		s.mocks.services[name] = svc.Adapter
	}
	reg, err := eng.Engine().RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: src})
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("registering the workflow: %w", err)
	}
	if !reg.GetRegistered() {
		eng.Close()
		return nil, fmt.Errorf("the engine refused the workflow:\n%s", strings.TrimSpace(reg.GetReport().GetText()))
	}
	if err := s.serve(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// serve starts the in-process runner (handlers and mocks) and waits until
// the engine has its registration.
func (s *Suite) serve(ctx context.Context) error {
	adapters := s.mocks.adapters()
	if len(s.opts.Handlers) == 0 && len(adapters) == 0 {
		return nil
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopRunner, s.runnerDone = cancel, make(chan error, 1)
	go func() {
		s.runnerDone <- runner.Serve(rctx, runner.Options{
			Name:            callerName,
			EngineAddr:      s.eng.Addr(),
			Adapters:        adapters,
			Logger:          s.opts.Logger,
			RetryBackoff:    20 * time.Millisecond,
			ShutdownTimeout: 5 * time.Second,
		}, s.opts.Handlers...)
	}()
	want := make([]string, 0, len(s.opts.Handlers)+len(adapters))
	for _, h := range s.opts.Handlers {
		want = append(want, h.Name)
	}
	for a := range adapters {
		want = append(want, a)
	}
	missing, err := s.waitFor(ctx, want, s.opts.RegistrationTimeout)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("the in-process runner did not register %s within %s", strings.Join(missing, ", "), s.opts.RegistrationTimeout)
	}
	return nil
}

// Addr is the in-process engine's gRPC address: a runner started with
// REALM_ENGINE_ADDR set to it serves its handlers to the fixtures.
func (s *Suite) Addr() string { return s.eng.Addr() }

// Definition is the workflow as loaded.
func (s *Suite) Definition() *workflow.Definition { return s.def }

// NeededHandlers are the handlers the workflow's steps name that the
// engine does not have built in, sorted.
func (s *Suite) NeededHandlers() []string {
	seen := map[string]bool{}
	for _, st := range s.def.Steps {
		if st.Handler != "" && st.Handler != quote.HandlerName {
			seen[st.Handler] = true
		}
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// WaitForHandlers waits up to timeout until every handler the workflow
// needs is registered, and returns those still missing then.
func (s *Suite) WaitForHandlers(ctx context.Context, timeout time.Duration) ([]string, error) {
	return s.waitFor(ctx, s.NeededHandlers(), timeout)
}

// waitFor polls the registry until every name (handler or adapter) is
// served by a live runner, or timeout passes.
func (s *Suite) waitFor(ctx context.Context, names []string, timeout time.Duration) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := s.eng.Registry().ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
		have := map[string]bool{}
		for _, r := range resp.GetRunners() {
			for _, h := range r.GetHandlers() {
				have[h.GetName()] = true
			}
			for _, a := range r.GetAdapters() {
				have[a] = true
			}
		}
		var missing []string
		for _, n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && err == nil {
				return missing, nil
			}
			if err != nil {
				return missing, err
			}
			return missing, ctx.Err()
		case <-tick.C:
		}
	}
}

// Close stops the runner and the engine; the store is forgotten.
func (s *Suite) Close() {
	if s.stopRunner != nil {
		s.stopRunner()
		<-s.runnerDone
		s.stopRunner = nil
	}
	s.eng.Close()
}

// Run drives one fixture's run to its end and checks what it expects.
func (s *Suite) Run(ctx context.Context, f Fixture) Result {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opts.RunTimeout)
	defer cancel()
	s.mocks.use(f.Mocks)
	d := &driver{eng: s.eng.Engine(), def: s.def, f: f, errorsLeft: map[string]int{}}
	res := Result{Name: f.Name}
	err := d.drive(ctx)
	res.RunID = d.runID
	calls, tripped := s.mocks.taken()
	res.Calls = calls
	if tripped != "" {
		// The tripwire's message says more than whatever the run did next.
		err = errors.New(tripped)
	}
	if err == nil {
		res.Phase, err = d.check(ctx)
	}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Passed = true
	return res
}
