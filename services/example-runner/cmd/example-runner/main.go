// Command example-runner is a handler runner serving the example handlers
// (package handlers) to engine-svc: it registers them with the engine's
// capability registry and runs the auto steps that name them.
//
//	example-runner [--engine-addr host:port] [--listen host:port] [--manifest realm.yaml]
//
// SIGINT or SIGTERM deregisters it and stops it gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/services/example-runner/handlers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var opts runner.Options
	var manifest string
	flag.StringVar(&opts.Name, "name", "example-runner", "the runner's name in the engine's records")
	flag.StringVar(&opts.EngineAddr, "engine-addr", "", "engine-svc's gRPC address (default $"+runner.EngineAddrEnv+", else "+runner.DefaultEngineAddr+")")
	flag.StringVar(&opts.Listen, "listen", runner.DefaultListen, "the address this runner listens on")
	flag.StringVar(&opts.Advertise, "advertise", "", "the endpoint sent to the engine (default: the listener's address)")
	flag.DurationVar(&opts.Lease, "lease", runner.DefaultLease, "the registration lease; renewed at a third of it")
	flag.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running steps may finish after a stop signal")
	flag.StringVar(&opts.MetricsAddr, "metrics-addr", os.Getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics on this address (empty: off)")
	flag.StringVar(&manifest, "manifest", "", "a deployment manifest (realm.yaml) whose handlers to serve too")
	flag.Parse()

	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	regs := handlers.Registrations()
	if manifest != "" {
		more, err := runner.LoadManifest(manifest, handlers.Registry())
		if err != nil {
			return fmt.Errorf("Error loading extensions: %w", err)
		}
		regs = append(regs, more...)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := tracing.Setup(ctx, opts.Name)
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { opts.Logger.Warn("tracing shutdown", "err", err) })
	err = runner.Serve(ctx, opts, regs...)
	if errors.Is(err, runner.ErrDuplicateHandler) {
		return fmt.Errorf("Error loading extensions: %w", err)
	}
	return err
}
