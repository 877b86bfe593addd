// Command adapter-runner serves the built-in service adapters of the spec's
// catalog (§13.2) to engine-svc, so that `uses_service` steps call an
// outside HTTP service without code: `http` (the generic HTTP/JSON adapter,
// every setting from the call's config), `filesystem` (files below
// --filesystem-root), and the adapters a deployment manifest's `adapters:`
// section builds from them (--manifest).
//
//	adapter-runner [--engine-addr host:port] [--listen host:port]
//	               [--manifest realm.yaml] [--filesystem-root dir]
//	               [--secret-env-prefix REALM_SECRET_]
//
// SIGINT or SIGTERM deregisters it and stops it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var opts runner.Options
	var manifest, fsRoot, envPrefix string
	flag.StringVar(&opts.Name, "name", "adapter-runner", "the runner's name in the engine's records")
	flag.StringVar(&opts.EngineAddr, "engine-addr", "", "engine-svc's gRPC address (default $"+runner.EngineAddrEnv+", else "+runner.DefaultEngineAddr+")")
	flag.StringVar(&opts.Listen, "listen", runner.DefaultListen, "the address this runner listens on")
	flag.StringVar(&opts.Advertise, "advertise", "", "the endpoint sent to the engine (default: the listener's address)")
	flag.DurationVar(&opts.Lease, "lease", runner.DefaultLease, "the registration lease; renewed at a third of it")
	flag.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running calls may finish after a stop signal")
	flag.StringVar(&opts.MetricsAddr, "metrics-addr", os.Getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics on this address (empty: off)")
	flag.StringVar(&manifest, "manifest", "", "a deployment manifest (realm.yaml) whose adapters to build and serve too")
	flag.StringVar(&fsRoot, "filesystem-root", ".", "the folder the filesystem adapter reads below (empty: no filesystem adapter)")
	flag.StringVar(&envPrefix, "secret-env-prefix", adapters.DefaultEnvPrefix, "the prefix of environment variables a workflow's auth.token_env may name ('*': any)")
	flag.Parse()

	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	// One set of buckets for every adapter: the limit is per process.
	aopts := adapters.Options{EnvPrefix: envPrefix, Limiters: ratelimit.New(nil)}
	adps, err := adapters.Catalog(aopts, fsRoot)
	if err != nil {
		return err
	}
	if manifest != "" {
		more, err := adapters.LoadManifest(manifest, aopts, fsRoot)
		if err != nil {
			return fmt.Errorf("Error loading extensions: %w", err)
		}
		for name, a := range more {
			if _, builtIn := adps[name]; builtIn {
				opts.Logger.Info(fmt.Sprintf("[realm] manifest adapter '%s' overrides the built-in adapter '%s'.", name, name))
			}
			adps[name] = a
		}
	}
	opts.Adapters = adps

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := tracing.Setup(ctx, opts.Name)
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { opts.Logger.Warn("tracing shutdown", "err", err) })
	return runner.Serve(ctx, opts)
}
