// Package runner serves step handlers to the Realm engine: a runner is a
// small gRPC server (realm.v1.RunnerService) that registers the handlers
// and adapters it has with the engine's capability registry
// (realm.v1.RegistryService), keeps its lease alive, and runs the auto steps
// the engine sends it.
//
//	err := runner.Serve(ctx, runner.Options{Name: "shop"},
//		runner.Registration{Name: "order_total", Handler: orderTotal})
//
// Serve returns when ctx ends: it deregisters, lets running steps finish (up
// to ShutdownTimeout) and stops.
package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/tracing"
)

// Defaults of Options.
const (
	DefaultListen          = "127.0.0.1:0"
	DefaultEngineAddr      = "127.0.0.1:7070"
	DefaultLease           = 15 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultRetryBackoff    = 500 * time.Millisecond
	DefaultMaxRetryBackoff = 15 * time.Second
)

// EngineAddrEnv names the environment variable that gives the engine's
// address when Options.EngineAddr is empty.
const EngineAddrEnv = "REALM_ENGINE_ADDR"

// Registration is one handler a runner serves.
type Registration struct {
	// Name is the name steps use in their `handler` field.
	Name    string
	Handler handler.Handler
	// UsesResources names the steps whose outputs the handler reads; the
	// engine checks them against the workflows that use the handler.
	UsesResources []string
	// Source says where the handler is declared, for the message that
	// refuses a name declared twice (default: the runner's name).
	Source string
	// Manifest is the path of the deployment manifest that declared the
	// handler (set by LoadManifest); empty for a handler declared in code.
	Manifest string
}

// Adapter is a service adapter a runner serves (steps with uses_service).
// Call runs one method ("fetch", "create", "update" or "delete") and returns
// the adapter's response as a JSON value; errors are reported like a
// handler's (a *handler.WorkflowError with its code, anything else by its
// message).
type Adapter interface {
	Call(ctx context.Context, call AdapterCall) (any, error)
}

// ConfigSchemaDeclarer is an Adapter that declares config_schema (spec
// §13.1): the JSON Schema a service step's `config` block must fit. The
// runner registers it with the adapter, and workflow registration refuses
// a step whose config does not fit, or that carries config at all when its
// adapter does not implement this. A nil schema declares none.
type ConfigSchemaDeclarer interface {
	ConfigSchema() map[string]any
}

// AdapterCall is one adapter call.
type AdapterCall struct {
	Method    string
	Operation string
	Params    map[string]any
	Config    map[string]any
	RunID     string
	Step      string
}

// Options configures Serve. The zero value works on a laptop.
type Options struct {
	// Name identifies the runner in the engine's logs and records
	// (default: the program's file name).
	Name string
	// Listen is the address the runner's gRPC server listens on (default
	// 127.0.0.1:0, a free loopback port).
	Listen string
	// Advertise is the endpoint sent to the engine (default: the address
	// the listener got). Set it when the engine reaches the runner by
	// another address (a Kubernetes Service, 0.0.0.0 listeners).
	Advertise string
	// EngineAddr is engine-svc's gRPC address (default $REALM_ENGINE_ADDR,
	// else 127.0.0.1:7070).
	EngineAddr string
	// Lease is how long the engine keeps the registration without a
	// renewal (default 15s); the runner renews at a third of it.
	Lease time.Duration
	// Adapters are the service adapters served, by name.
	Adapters map[string]Adapter
	// ShutdownTimeout bounds deregistration and the wait for running steps
	// when ctx ends (default 10s); steps still running then are cut off.
	ShutdownTimeout time.Duration
	// RetryBackoff is the first wait after a failed registration or
	// renewal (default 500ms); it doubles up to MaxRetryBackoff (default
	// 15s), with jitter.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// DialOptions are added to the connection to the engine (default:
	// plaintext); ServerOptions to the runner's gRPC server.
	DialOptions   []grpc.DialOption
	ServerOptions []grpc.ServerOption
	// Logger receives registration and panic reports (default
	// slog.Default()).
	Logger *slog.Logger
	// TLS, when it names files, serves mutual TLS: only the engine's
	// certificate (role engine) may call the runner, and the runner
	// presents its own certificate, whose URI SANs grant what it
	// registers, to the engine. Without it the runner serves plaintext,
	// on a loopback address only.
	TLS mtls.Files
	// MetricsAddr, when set, serves Prometheus /metrics there: the runner's
	// gRPC server metrics (handler calls by code and latency) and the Go
	// runtime's.
	MetricsAddr string
}

func (o Options) withDefaults() Options {
	o.Name = cmp.Or(o.Name, filepath.Base(os.Args[0]))
	o.Listen = cmp.Or(o.Listen, DefaultListen)
	o.EngineAddr = cmp.Or(o.EngineAddr, os.Getenv(EngineAddrEnv), DefaultEngineAddr)
	o.Lease = cmp.Or(o.Lease, DefaultLease)
	o.ShutdownTimeout = cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout)
	o.RetryBackoff = cmp.Or(o.RetryBackoff, DefaultRetryBackoff)
	o.MaxRetryBackoff = cmp.Or(o.MaxRetryBackoff, DefaultMaxRetryBackoff)
	if o.MaxRetryBackoff < o.RetryBackoff {
		o.MaxRetryBackoff = o.RetryBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Policy is who may call a runner: the engine (and an operator, to
// debug); the health check is open.
func Policy(name string) mtls.Policy {
	return mtls.Policy{
		Service: "runner " + name,
		Rules:   map[string][]mtls.Role{"/realm.v1.RunnerService/": {mtls.RoleEngine, mtls.RoleOperator}},
		Open:    []string{"/grpc.health.v1.Health/"},
		Describe: map[mtls.Role]string{
			mtls.RoleRunner:    "may call only engine-svc's capability registry",
			mtls.RoleFrontDoor: "calls engine-svc, not runners",
		},
	}
}

// Serve runs a runner until ctx ends: it checks the registrations (a name
// declared twice is refused before anything starts), listens on
// opts.Listen, registers with the engine (retrying with backoff until it
// succeeds), renews the lease at a third of its length (registering again
// if the engine has forgotten the runner), and on ctx's end deregisters and
// stops gracefully. It returns nil after a clean stop, and an error when the
// registrations are refused or the server cannot run.
func Serve(ctx context.Context, opts Options, handlers ...Registration) error {
	opts = opts.withDefaults()
	svc, specs, err := newService(opts, handlers)
	if err != nil {
		return err
	}
	adapters, adapterSpecs, err := describeAdapters(opts.Adapters)
	if err != nil {
		return err
	}
	// Each call continues the engine's trace (spans only once tracing.Setup
	// configures an exporter). The tracing options come first, so the
	// caller's own interceptors see the trace.
	serverOpts := append(tracing.ServerOptions(), opts.ServerOptions...)
	dialOpts := opts.DialOptions
	if opts.TLS.Configured() {
		creds, err := opts.TLS.ServerCredentials()
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		serverOpts = append(serverOpts, Policy(opts.Name).ServerOptions(creds)...)
		// The engine's certificate, not another runner's, answers.
		transport, err := client.Transport(opts.TLS, mtls.RoleEngine)
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		dialOpts = append([]grpc.DialOption{transport}, dialOpts...)
	} else if err := mtls.CheckPlaintext("runner "+opts.Name, opts.Listen); err != nil {
		return err
	} else {
		opts.Logger.Warn(mtls.PlaintextWarning("runner "+opts.Name, opts.Listen))
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("runner: listen on %s: %w", opts.Listen, err)
	}
	conn, err := client.NewConn(opts.EngineAddr, dialOpts...)
	if err != nil {
		lis.Close()
		return fmt.Errorf("runner: engine address %s: %w", opts.EngineAddr, err)
	}
	defer conn.Close()

	if opts.MetricsAddr != "" {
		mreg := metrics.NewRegistry()
		serverOpts = append(serverOpts, metrics.GRPCServer(mreg)...)
		mctx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
		msrv, err := metrics.Serve(mctx, opts.Logger, opts.MetricsAddr, mreg)
		if err != nil {
			stopMetrics()
			lis.Close()
			return fmt.Errorf("runner: %w", err)
		}
		// Stops after the gRPC server, so the last calls are still counted
		// while the runner drains.
		defer func() { stopMetrics(); _ = msrv.Wait() }()
	}
	srv := grpc.NewServer(serverOpts...)
	realmv1.RegisterRunnerServiceServer(srv, svc)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()

	reg := &registrar{
		client: realmv1.NewRegistryServiceClient(conn),
		opts:   opts,
		req: &realmv1.RegisterRequest{
			Endpoint:     cmp.Or(opts.Advertise, lis.Addr().String()),
			Handlers:     specs,
			Adapters:     adapters,
			AdapterSpecs: adapterSpecs,
			RunnerName:   opts.Name,
		},
	}
	regCtx, stopReg := context.WithCancel(ctx)
	defer stopReg()
	regDone := make(chan string, 1)
	go func() { regDone <- reg.run(regCtx) }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("runner: serve: %w", err)
	}
	stopReg()
	runnerID := <-regDone

	// Deregister first, so the engine stops sending steps, then let the
	// running ones finish.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	if runnerID != "" {
		if _, err := reg.client.Deregister(shutdownCtx, &realmv1.DeregisterRequest{RunnerId: runnerID}); err != nil {
			opts.Logger.Warn("runner: deregistration failed; the engine drops the runner when its lease ends",
				"runner", opts.Name, "runner_id", runnerID, "err", err)
		}
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		opts.Logger.Warn("runner: steps still running at the shutdown deadline were cut off", "runner", opts.Name)
		srv.Stop()
		<-stopped
	}
	if runErr != nil && !errors.Is(runErr, grpc.ErrServerStopped) {
		return runErr
	}
	return nil
}

// newService checks the registrations and builds the RunnerService.
func newService(opts Options, regs []Registration) (*service, []*realmv1.HandlerSpec, error) {
	if err := checkRegistrations(regs, opts.Name); err != nil {
		return nil, nil, err
	}
	svc := &service{handlers: map[string]handler.Handler{}, adapters: map[string]Adapter{}, log: opts.Logger}
	specs := make([]*realmv1.HandlerSpec, 0, len(regs))
	for _, r := range regs {
		svc.handlers[r.Name] = r.Handler
		specs = append(specs, &realmv1.HandlerSpec{Name: r.Name, UsesResources: r.UsesResources})
	}
	for name, a := range opts.Adapters {
		if name == "" || a == nil {
			return nil, nil, fmt.Errorf("runner: adapter %q has no name or no implementation", name)
		}
		svc.adapters[name] = a
	}
	return svc, specs, nil
}

// describeAdapters names the adapters served, sorted, and their specs
// (one per adapter, the config_schema as JSON text). Runners send both:
// engines that predate specs read the names.
func describeAdapters(adapters map[string]Adapter) ([]string, []*realmv1.AdapterSpec, error) {
	names := sortedStrings(slices.Collect(maps.Keys(adapters)))
	specs := make([]*realmv1.AdapterSpec, 0, len(names))
	for _, name := range names {
		spec := &realmv1.AdapterSpec{Name: name}
		if d, ok := adapters[name].(ConfigSchemaDeclarer); ok {
			if sch := d.ConfigSchema(); sch != nil {
				b, err := json.Marshal(sch)
				if err != nil {
					return nil, nil, fmt.Errorf("runner: adapter %q: config_schema is not JSON: %w", name, err)
				}
				spec.ConfigSchemaJson = string(b)
			}
		}
		specs = append(specs, spec)
	}
	return names, specs, nil
}

// ErrDuplicateHandler matches (with errors.Is) the error Serve returns for
// a handler name declared twice; its text is the contract's message, which a
// command prints after "Error loading extensions: ".
var ErrDuplicateHandler = errors.New("runner: handler name declared twice")

type duplicateError struct{ msg string }

func (e duplicateError) Error() string        { return e.msg }
func (e duplicateError) Is(target error) bool { return target == ErrDuplicateHandler }

// checkRegistrations refuses an unnamed or nil handler, and a name declared
// twice, with the contract's collision messages.
func checkRegistrations(regs []Registration, runnerName string) error {
	seen := map[string]Registration{}
	for _, r := range regs {
		if r.Name == "" {
			return errors.New("runner: a handler registration has no name")
		}
		if r.Handler == nil {
			return fmt.Errorf("runner: handler '%s' has no implementation", r.Name)
		}
		prev, dup := seen[r.Name]
		if !dup {
			seen[r.Name] = r
			continue
		}
		code, manifest := prev, r
		if code.Manifest != "" {
			code, manifest = r, prev
		}
		if code.Manifest == "" && manifest.Manifest != "" {
			return duplicateError{fmt.Sprintf("Extension handler '%s' is declared by both '%s' and the deployment manifest '%s' — manifest entries and code-module exports share one namespace; names must be unique.",
				r.Name, cmp.Or(code.Source, runnerName), manifest.Manifest)}
		}
		return duplicateError{fmt.Sprintf("Extension handler '%s' is declared by both '%s' and '%s' — extension names must be unique across declared modules.",
			r.Name, declaredBy(prev, runnerName), declaredBy(r, runnerName))}
	}
	return nil
}

func declaredBy(r Registration, runnerName string) string {
	return cmp.Or(r.Manifest, r.Source, runnerName)
}
