// Command engine-svc serves the Realm engine over gRPC.
//
//	engine-svc [--addr 127.0.0.1:7070] [--data-dir ~/.realm] [--redis-url redis://… | --redis-cluster-addrs a,b,c | --redis-sentinel-addrs a,b --redis-sentinel-master m] [--metrics-addr :9090]
//	           [--tls-cert f --tls-key f --tls-client-ca f [--tls-ca f]]
//
// With the TLS files every caller must present a certificate from the
// Realm CA naming its role (docs/security.md); without them it serves
// plaintext on a loopback address only.
//
// Without a Redis (--redis-url, --redis-cluster-addrs or --redis-sentinel-addrs,
// or their env) it runs an embedded Redis persisted
// under --data-dir, so a laptop needs nothing else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/gcpolicy"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/logging"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/redisconn"
	"github.com/realm-go/realm/pkg/tracing"
)

func main() {
	log := logging.New(os.Stderr, os.Getenv)
	if err := run(log); err != nil {
		log.Error("engine-svc stopped", "err", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func defaultDataDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".realm"
	}
	return filepath.Join(home, ".realm")
}

func run(log *slog.Logger) error {
	addr := flag.String("addr", envOr("REALM_ENGINE_LISTEN", "127.0.0.1:7070"), "gRPC listen address (env REALM_ENGINE_LISTEN)")
	dataDir := flag.String("data-dir", envOr("REALM_DATA_DIR", defaultDataDir()), "directory of the embedded store (env REALM_DATA_DIR)")
	var rf redisconn.Flags
	rf.Register(flag.CommandLine, os.Getenv, "Redis URL; no Redis given runs the embedded store")
	waitReplicas := flag.Int("redis-wait-replicas", 0, "acknowledge a commit only once WAIT sees this many replicas hold it, so a failover does not lose it (0: off)")
	buckets := flag.Int("buckets", 256, "run buckets of a new store (fixed once created)")
	keepVersions := flag.Int("keep-workflow-versions", store.DefaultKeepWorkflowVersions, "versions of each workflow kept (the newest); a registration deletes older ones (0: keep every version)")
	grace := flag.Duration("shutdown-grace", 60*time.Second, "how long in-flight calls may finish on shutdown")
	sweep := flag.Duration("sweep-interval", 5*time.Second, "how often the sweeper carries out expired gates that declare on_expiry, frees the stale claims of idempotent steps, drains cleanup no process is delivering and packs rested ended runs (--pack-after) (0 turns it off)")
	packAfter := flag.Duration("pack-after", engine.DefaultPackAfter, "how long a run that ended and owes nothing rests before the sweeper packs it, about a fifth of its memory (0: never; see docs/deploy.md, Upgrade, before the first roll of a release that packs)")
	prefix := flag.String("redis-prefix", "realm", "prefix of every Redis key (several stacks can share one Redis)")
	// Testing only, left out of -help: claims go stale after this instead
	// of the spec's window (at least 15 minutes), so a test can see a dead
	// replica's claim go stale and reclaim it.
	claimWindow := flag.Duration("claim-window", 0, "")
	flag.Usage = usageHiding("claim-window")
	storePing := flag.Duration("store-ping-interval", time.Second, "how often readiness pings the store: NOT_SERVING while it fails (0 turns the check off)")
	reflect := flag.Bool("reflection", false, "serve gRPC server reflection (for grpcurl and the like); off by default")
	gcPercent := flag.Int("gc-percent", gcpolicy.DefaultPercent, "the garbage collector's target, as GOGC sets it (GOGC in the environment wins); a soft memory limit of 90% of the container's memory limit is set too, unless GOMEMLIMIT is")
	metricsAddr := flag.String("metrics-addr", os.Getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off) (env REALM_METRICS_LISTEN)")
	var tlsFiles mtls.Files
	tlsFiles.RegisterFlags(flag.CommandLine, true, nil)
	flag.Parse()

	// The transition path allocates on every call over a small live heap:
	// a higher GC target than Go's 100 spends a quarter less CPU per
	// transition (docs/benchmarks.md, "2026-12-07").
	gc, err := gcpolicy.Apply(*gcPercent, os.Getenv, "/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("--gc-percent: %w", err)
	}
	log.Info("garbage collector", "gc_percent", gc.Percent, "gc_percent_from", gc.PercentFrom, "memory_limit_bytes", gc.Limit, "memory_limit_from", gc.LimitFrom)

	// Mutual TLS, or plaintext on loopback only: decided before anything
	// is opened, so a refusal leaves nothing half-started.
	var serverOpts []grpc.ServerOption
	runnerTransport := grpc.WithTransportCredentials(insecure.NewCredentials())
	if tlsFiles.Configured() {
		creds, err := tlsFiles.ServerCredentials()
		if err != nil {
			return err
		}
		serverOpts = server.Policy().ServerOptions(creds)
		// The engine calls runners with the same certificate, and wants
		// a runner's certificate back.
		rf := tlsFiles
		if rf.CA == "" {
			rf.CA = rf.ClientCA
		}
		if runnerTransport, err = client.Transport(rf, mtls.RoleRunner); err != nil {
			return err
		}
		log.Info("mutual TLS on: every caller presents a certificate from the Realm CA", "cert", tlsFiles.Cert)
	} else {
		if err := mtls.CheckPlaintext("engine-svc", *addr); err != nil {
			return err
		}
		log.Warn(mtls.PlaintextWarning("engine-svc", *addr))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := tracing.Setup(ctx, "engine-svc")
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { log.Warn("tracing shutdown", "err", err) })

	if *keepVersions < 0 {
		return fmt.Errorf("--keep-workflow-versions %d: give a count of versions, or 0 to keep every one", *keepVersions)
	}
	keep := *keepVersions
	if keep == 0 {
		keep = -1 // store.Options reads 0 as the default
	}
	// external: a Redis was given. Decided before the embedded store's
	// address is put in rf below, which would make rf say so too.
	external := rf.Configured()
	if !external {
		if *waitReplicas > 0 {
			return errors.New("--redis-wait-replicas needs a Redis with replicas; the embedded store has none")
		}
		srv, err := embedded.Open(ctx, *dataDir, log)
		if err != nil {
			return fmt.Errorf("open embedded store in %s: %w", *dataDir, err)
		}
		defer srv.Close()
		// Where a local notify-svc finds the store (make run): the port
		// is chosen afresh at each start.
		addrFile := filepath.Join(*dataDir, "store.url")
		if err := os.WriteFile(addrFile, []byte(srv.URL()+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", addrFile, err)
		}
		defer os.Remove(addrFile)
		rf = redisconn.Flags{URL: "redis://" + srv.Addr()}
		log.Info("embedded store", "data_dir", *dataDir)
	} else {
		log.Info("redis store", "redis", rf.String())
	}
	// Not Open: whether the store answers is checked below, with the store.
	client, err := rf.NewClient()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer client.Close()
	if external {
		if err := checkEviction(ctx, log, client); err != nil {
			return err
		}
	}
	mreg := metrics.NewRegistry()
	client.AddHook(metrics.RedisHook(mreg))
	// Concurrent commits share a pipeline, on Redis and on the embedded
	// store (whose replies share an fsync).
	st := store.NewRedis(client, store.Options{Prefix: *prefix, Buckets: *buckets, WaitReplicas: *waitReplicas, KeepWorkflowVersions: keep,
		PipelineCommits: true})
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Ping(pingCtx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}

	reg := registry.New(client, *prefix, nil, 0)
	hs := health.NewServer()
	msrv, err := metrics.Serve(ctx, log, *metricsAddr, mreg, metrics.HealthReady(hs, "realm.v1.EngineService"))
	if err != nil {
		return err
	}
	if msrv != nil {
		// Stop first: the listener ends with ctx, and run may return early.
		defer func() { stop(); _ = msrv.Wait() }()
	}
	if *packAfter < 0 {
		return fmt.Errorf("--pack-after %s: want 0 (never) or more", *packAfter)
	}
	if *packAfter == 0 {
		*packAfter = engine.NoPacking
	}
	eng := engine.New(engine.Options{Store: st, Logger: log, Registry: reg, ClaimWindow: *claimWindow, Metrics: mreg, PackAfter: *packAfter,
		RunnerDialOptions: append(metrics.GRPCClient(mreg), runnerTransport)})
	defer eng.Close()
	if *sweep > 0 {
		// The sweeper stops with ctx; many replicas may sweep at once.
		go eng.RunSweeper(ctx, *sweep)
	}
	gs := grpc.NewServer(append(append(append(metrics.GRPCServer(mreg), tracing.ServerOptions()...), server.GRPCOptions()...), serverOpts...)...)
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	realmv1.RegisterRegistryServiceServer(gs, server.NewRegistry(reg, eng.CheckUsesResources))
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("realm.v1.EngineService", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("realm.v1.RegistryService", healthpb.HealthCheckResponse_SERVING)
	ready := []string{"realm.v1.EngineService", "realm.v1.RegistryService"}
	// Readiness follows the store: NOT_SERVING while Redis is unreachable
	// (restart, failover), SERVING again once it answers, without a
	// restart of this process. The watch ends before run returns.
	if *storePing > 0 {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			server.StoreWatch{Health: hs, Ping: st.Ping, Interval: *storePing, Logger: log, Services: ready}.Run(watchCtx)
		}()
		defer func() { stopWatch(); <-watched }()
	}
	if *reflect {
		// Off by default: it hands anyone who can connect a map of every
		// call this service takes.
		reflection.Register(gs)
		log.Info("gRPC server reflection is on (--reflection)")
	}

	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("engine-svc listening", "addr", lis.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()

	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight calls", "grace", grace.String())
	hs.Shutdown()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(*grace):
		// Cut off what is left; each call still running handlers then
		// releases its claims (or records what finished) before the store
		// closes, so another replica can take those steps at once.
		gs.Stop()
		if !eng.WaitDrives(5 * time.Second) {
			log.Warn("some calls did not release their claims in time; they wait for their deadline or realm run reclaim")
		}
	}
	return nil
}

// checkEviction refuses a Redis that may evict run keys. A policy it cannot
// read (CONFIG renamed by a managed Redis, the server not up yet) is only
// warned about: the operator answers for it.
func checkEviction(ctx context.Context, log *slog.Logger, c redis.UniversalClient) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := store.CheckEviction(cctx, c)
	if errors.Is(err, store.ErrEvicting) {
		return err
	}
	if err != nil {
		log.Warn("could not read Redis's maxmemory-policy; it must be noeviction, or run keys can be evicted", "err", err)
	}
	return nil
}

// usageHiding is flag's usage without the named (testing-only) flags.
func usageHiding(hidden ...string) func() {
	return func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "Usage of %s:\n", filepath.Base(os.Args[0]))
		shown := flag.NewFlagSet("", flag.ContinueOnError)
		shown.SetOutput(out)
		flag.VisitAll(func(f *flag.Flag) {
			if !slices.Contains(hidden, f.Name) {
				shown.Var(f.Value, f.Name, f.Usage)
			}
		})
		shown.PrintDefaults()
	}
}
