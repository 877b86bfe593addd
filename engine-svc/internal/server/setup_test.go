package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
)

// backends are the stores every engine test runs against: a real Redis,
// miniredis, and a three-master Redis Cluster (scripts/redis-cluster.sh).
var backends = []string{"redis", "miniredis", "cluster"}

type env struct {
	client   realmv1.EngineServiceClient
	registry realmv1.RegistryServiceClient
	health   healthpb.HealthClient
	counter  *store.RoundTripCounter
	st       *store.Redis
	rc       redis.UniversalClient
	prefix   string
	eng      *engine.Engine
	clock    *clock
}

// clock is the engine's injected time: tests move it instead of waiting.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// setup starts an engine over a store of the given kind, serves it with
// real gRPC on a loopback socket, and returns a client.
func setup(t testing.TB, backend string, opts ...setupOption) *env {
	t.Helper()
	var cfg setupConfig
	for _, o := range opts {
		o(&cfg)
	}
	var rc redis.UniversalClient
	prefix := "realm"
	switch backend {
	case "redis":
		rc, prefix = realRedis(t)
	case "cluster":
		rc = storetest.ConnectCluster(t)
		prefix = storetest.UniquePrefix(t)
		storetest.CleanupClusterPrefix(t, prefix)
	case "embedded": // make run's store: miniredis with its fsynced journal
		srv, err := embedded.Open(context.Background(), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		rc = redis.NewClient(&redis.Options{Addr: srv.Addr()})
	default:
		m := miniredis.RunT(t)
		rc = redis.NewClient(&redis.Options{Addr: m.Addr()})
	}
	if cfg.metrics != nil {
		rc.AddHook(metrics.RedisHook(cfg.metrics))
	}
	counter := &store.RoundTripCounter{}
	// Commits are pipelined as engine-svc pipelines them (on Redis, Cluster
	// and the embedded store); miniredis takes them one at a time.
	pipelined := backend == "redis" || backend == "cluster" || backend == "embedded"
	st := store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16, Counter: counter, PipelineCommits: pipelined})
	clk := &clock{}
	reg := registry.New(rc, prefix, clk.Now, time.Millisecond)
	eng := engine.New(engine.Options{Store: st, Clock: clk.Now, Registry: reg, Logger: cfg.logger(), Metrics: cfg.metrics, RunnerDialOptions: cfg.runnerDial, CheckCache: checkCache(t)})
	conn := serve(t, eng, reg, cfg.server...)
	t.Cleanup(func() { st.Close() })
	return &env{client: realmv1.NewEngineServiceClient(conn), registry: realmv1.NewRegistryServiceClient(conn), health: healthpb.NewHealthClient(conn), counter: counter, st: st, rc: rc, prefix: prefix, eng: eng, clock: clk}
}

// realRedis is the real Redis with a key prefix of the test's own, removed
// when the test ends.
func realRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rc := storetest.ConnectRedis(t)
	prefix := storetest.UniquePrefix(t)
	storetest.CleanupPrefix(t, prefix)
	return rc, prefix
}

// engineOn serves an engine over st (a store of the test's own making, on
// rc and prefix: a proxied client, a wrapper, another bucket count); the
// registry talks to rc directly.
func engineOn(t testing.TB, st store.Store, rc redis.UniversalClient, prefix string) *env {
	t.Helper()
	clk := &clock{}
	reg := registry.New(rc, prefix, clk.Now, time.Millisecond)
	eng := engine.New(engine.Options{Store: st, Clock: clk.Now, Registry: reg, Logger: (setupConfig{}).logger(), CheckCache: checkCache(t)})
	conn := serve(t, eng, reg)
	e := &env{client: realmv1.NewEngineServiceClient(conn), registry: realmv1.NewRegistryServiceClient(conn), rc: rc, prefix: prefix, eng: eng, clock: clk}
	if r, ok := st.(*store.Redis); ok {
		e.st = r
	}
	return e
}

// setupConfig holds what a test adds to the standard engine.
type setupConfig struct {
	metrics    prometheus.Registerer // engine, gRPC server and Redis client
	server     []grpc.ServerOption
	runnerDial []grpc.DialOption
	log        slog.Handler // nil: discard
}

func (c setupConfig) logger() *slog.Logger {
	if c.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(c.log)
}

type setupOption func(*setupConfig)

// withMetrics instruments the engine and its gRPC server into reg.
func withMetrics(reg *prometheus.Registry) setupOption {
	return func(c *setupConfig) {
		c.metrics = reg
		c.server = append(c.server, metrics.GRPCServer(reg)...)
		c.runnerDial = append(c.runnerDial, metrics.GRPCClient(reg)...)
	}
}

// serve serves eng and reg with real gRPC on a loopback socket until the
// test ends and returns a connection to it.
func serve(t testing.TB, eng *engine.Engine, reg *registry.Registry, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	gs := grpc.NewServer(append(server.GRPCOptions(), opts...)...)
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	realmv1.RegisterRegistryServiceServer(gs, server.NewRegistry(reg, eng.CheckUsesResources))
	healthpb.RegisterHealthServer(gs, health.NewServer()) // as engine-svc serves it
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	// The connection every Realm client makes (pkg/client).
	conn, err := client.NewConn(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		conn.Close()
		gs.Stop()
	})
	return conn
}

// withLog sends the engine's log to h.
func withLog(h slog.Handler) setupOption {
	return func(c *setupConfig) { c.log = h }
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// register registers a workflow file from testdata (or literal YAML).
func (e *env) register(t testing.TB, yaml []byte) *realmv1.RegisterWorkflowResponse {
	t.Helper()
	resp, err := e.client.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: yaml, Path: "workflow.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// secondClient is a connection of its own to the env's store, as another
// replica has; closed when the test ends.
func (e *env) secondClient(t testing.TB) redis.UniversalClient {
	var c redis.UniversalClient
	switch rc := e.rc.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(rc.Options())
	case *redis.Client:
		c = redis.NewClient(rc.Options())
	default:
		t.Fatalf("unknown client %T", e.rc)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkCache is engine.Options.CheckCache for every test (a benchmark
// measures the engine as it runs).
func checkCache(t testing.TB) bool {
	_, bench := t.(*testing.B)
	return !bench
}
