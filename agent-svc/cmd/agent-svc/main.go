// Command agent-svc serves the agent driver over gRPC: DriveRun drives a
// run to its end, asking Anthropic or OpenAI for each agent step.
//
//	agent-svc [--addr 127.0.0.1:7071] [--engine-addr 127.0.0.1:7070]
//	          [--redis-url redis://… | --redis-cluster-addrs a,b,c | --redis-sentinel-addrs a,b --redis-sentinel-master m] [--max-drives 8]
//	          [--allow-base-url URL]... [--tool-env NAME]...
//
// Keys come from ANTHROPIC_API_KEY and OPENAI_API_KEY, addresses from
// ANTHROPIC_BASE_URL and OPENAI_BASE_URL. A drive may name another base URL
// only when it is allowed with --allow-base-url (agent-svc's keys go
// there). With --redis-url the drive limit is global across every replica
// sharing that Redis; without it the limit is this process's own, and the
// service says so at start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/realm-go/realm/agent-svc/internal/durable"
	"github.com/realm-go/realm/agent-svc/internal/limit"
	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/server"
	"github.com/realm-go/realm/pkg/client"
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
		log.Error("agent-svc stopped", "err", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

// agentPolicy is who may call agent-svc: a front door (listen-svc) or an
// operator (realm agent) may start a drive; the health check is open.
var agentPolicy = mtls.Policy{
	Service: "agent-svc",
	Rules:   map[string][]mtls.Role{"/realm.v1.AgentService/DriveRun": {mtls.RoleFrontDoor, mtls.RoleOperator}},
	Open:    []string{"/grpc.health.v1.Health/"},
	Describe: map[mtls.Role]string{
		mtls.RoleRunner: "may call only engine-svc's capability registry",
		mtls.RoleEngine: "is engine-svc's own and calls only runners",
	},
}

func run(log *slog.Logger) error {
	addr := flag.String("addr", envOr("REALM_AGENT_LISTEN", "127.0.0.1:7071"), "gRPC listen address (env REALM_AGENT_LISTEN)")
	engineAddr := flag.String("engine-addr", client.EngineAddr(), "engine-svc address (host:port, or a comma-separated list of replicas) (env "+client.EngineAddrEnv+")")
	var rf redisconn.Flags
	rf.Register(flag.CommandLine, os.Getenv, "Redis holding the global drive limit; no Redis given limits this process only")
	maxDrives := flag.Int("max-drives", 8, "drives at once (across every replica with --redis-url); more wait their turn")
	gatePoll := flag.Duration("gate-poll", 3*time.Second, "how often a run waiting at a gate is re-read (at most 3s)")
	grace := flag.Duration("shutdown-grace", 60*time.Second, "how long drives may finish on shutdown")
	redisPrefix := flag.String("redis-prefix", "realm:agent", "prefix of agent-svc's Redis keys (the drive limit and the owed drives); replicas that share them share one prefix")
	driveLease := flag.Duration("drive-lease", 30*time.Second, "how long an owed drive stays this replica's without a renewal; after a crash another replica takes it up once it lapses")
	pickupEvery := flag.Duration("pickup-interval", 5*time.Second, "how often owed drives whose replica stopped or died are looked for")
	reflect := flag.Bool("reflection", false, "serve gRPC server reflection (for grpcurl and the like); off by default")
	var allowURLs urlList
	for _, u := range strings.Split(os.Getenv("REALM_AGENT_ALLOW_BASE_URLS"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			allowURLs = append(allowURLs, u)
		}
	}
	flag.Var(&allowURLs, "allow-base-url", "a base `url` (and the paths below it) a drive may name besides the providers' official endpoints and OPENAI_BASE_URL/ANTHROPIC_BASE_URL; repeatable (env REALM_AGENT_ALLOW_BASE_URLS, comma-separated)")
	var toolEnv urlList
	for _, n := range strings.Split(os.Getenv("REALM_AGENT_TOOL_ENV"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			toolEnv = append(toolEnv, n)
		}
	}
	flag.Var(&toolEnv, "tool-env", "a `name` of a variable that '${NAME}' in a workflow's mcp_servers env or headers may read; repeatable (env REALM_AGENT_TOOL_ENV, comma-separated). Unset: any variable but ANTHROPIC_API_KEY, OPENAI_API_KEY and REALM_*")
	metricsAddr := flag.String("metrics-addr", os.Getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off) (env REALM_METRICS_LISTEN)")
	var tlsFiles mtls.Files
	tlsFiles.RegisterFlags(flag.CommandLine, true, nil)
	flag.Parse()
	// Mutual TLS both ways (callers to it, it to engine-svc), or
	// plaintext on loopback only.
	var serverOpts []grpc.ServerOption
	if tlsFiles.Configured() {
		creds, err := tlsFiles.ServerCredentials()
		if err != nil {
			return err
		}
		serverOpts = agentPolicy.ServerOptions(creds)
	} else {
		if err := mtls.CheckPlaintext("agent-svc", *addr); err != nil {
			return err
		}
		log.Warn(mtls.PlaintextWarning("agent-svc", *addr))
	}
	if tlsFiles.CA == "" {
		tlsFiles.CA = tlsFiles.ClientCA
	}
	toEngine, err := client.Transport(tlsFiles, mtls.RoleEngine)
	if err != nil {
		return err
	}
	if *maxDrives < 1 {
		return fmt.Errorf("--max-drives must be at least 1")
	}
	allow, err := provider.NewAllowlist(allowURLs...)
	if err != nil {
		return err
	}
	if *driveLease < 300*time.Millisecond || *pickupEvery <= 0 {
		return fmt.Errorf("--drive-lease must be at least 300ms and --pickup-interval positive")
	}

	if len(allowURLs) > 0 {
		log.Info("drives may name these base URLs besides the official endpoints", "allow_base_urls", []string(allowURLs))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mreg := metrics.NewRegistry()
	shutdownTracing, err := tracing.Setup(ctx, "agent-svc")
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { log.Warn("tracing shutdown", "err", err) })

	var lim limit.Limiter
	var book *durable.Book
	if rf.Configured() {
		rc, err := rf.Open(ctx)
		if err != nil {
			return err
		}
		rc.AddHook(metrics.RedisHook(mreg))
		defer rc.Close()
		lim = limit.NewRedis(rc, *maxDrives, limit.RedisOptions{Prefix: *redisPrefix + ":drives"})
		// Detached drives are written down in the same Redis, so another
		// replica takes them up if this one dies.
		book = durable.New(rc, *redisPrefix+":book", *driveLease)
		log.Info("drive limit is global (Redis)", "max_drives", *maxDrives)
	} else {
		lim = limit.NewLocal(*maxDrives)
		log.Info("drive limit is this process's own: no --redis-url, so replicas do not share it", "max_drives", *maxDrives)
	}

	conn, err := client.NewConn(*engineAddr, append(client.Instrumented(mreg), toEngine)...)
	if err != nil {
		return fmt.Errorf("engine-svc address %s: %w", *engineAddr, err)
	}
	defer conn.Close()

	// Model calls get client spans only when traces are exported: a
	// traceparent is not sent to a provider otherwise.
	var httpClient *http.Client
	if tracing.Exporting() {
		httpClient = &http.Client{Transport: tracing.Transport(nil)}
	}
	svc := server.New(server.Config{
		Metrics:  mreg,
		Engine:   realmv1.NewEngineServiceClient(conn),
		Registry: realmv1.NewRegistryServiceClient(conn),
		Services: provider.Services{
			Anthropic: provider.Config{APIKey: strings.TrimSpace(os.Getenv("ANTHROPIC_API_KEY")), BaseURL: strings.TrimSpace(os.Getenv("ANTHROPIC_BASE_URL")), HTTPClient: httpClient},
			OpenAI:    provider.Config{APIKey: strings.TrimSpace(os.Getenv("OPENAI_API_KEY")), BaseURL: strings.TrimSpace(os.Getenv("OPENAI_BASE_URL")), HTTPClient: httpClient},
		},
		Limiter:       lim,
		GatePoll:      *gatePoll,
		Logger:        log,
		Book:          book,
		AllowBaseURLs: allow,
		ToolEnv:       toolEnv,
	})
	pickupDone := make(chan struct{})
	go func() { defer close(pickupDone); svc.Pickup(ctx, *pickupEvery) }()
	defer func() { <-pickupDone }()
	hs := health.NewServer()
	msrv, err := metrics.Serve(ctx, log, *metricsAddr, mreg, metrics.HealthReady(hs, "realm.v1.AgentService"))
	if err != nil {
		return err
	}
	if msrv != nil {
		// Stop first: the listener ends with ctx, and run may return early.
		defer func() { stop(); _ = msrv.Wait() }()
	}
	gs := grpc.NewServer(append(append(metrics.GRPCServer(mreg), tracing.ServerOptions()...), serverOpts...)...)
	realmv1.RegisterAgentServiceServer(gs, svc)
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("realm.v1.AgentService", healthpb.HealthCheckResponse_SERVING)
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
	log.Info("agent-svc listening", "addr", lis.Addr().String(), "engine", *engineAddr)
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
	hs.Shutdown()
	if book != nil {
		// Detached drives are owed in Redis: hand them to the other
		// replicas now rather than hold the shutdown for its grace.
		svc.Stop()
	}
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(*grace):
		gs.Stop()
	}
	// Detached drives still going stop here; with Redis they stay owed and
	// another replica takes them up at once.
	svc.Stop()
	return nil
}

// urlList is a repeatable flag: each use adds one entry.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, ",") }

func (l *urlList) Set(s string) error {
	*l = append(*l, strings.TrimSpace(s))
	return nil
}
