// Package enginetest starts a real engine for other modules' tests: a store
// over real Redis or miniredis, the engine, and its gRPC server on a
// loopback socket, as engine-svc's own tests do.
package enginetest

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Backends are the stores Start takes: "redis" (the real Redis at
// $REDIS_URL, under a prefix of its own; unreachable fails the test) and
// "miniredis".
var Backends = []string{"redis", "miniredis"}

// Options change the engine StartWith serves.
type Options struct {
	// Clock is the engine's time (engine.Options.Clock); nil is time.Now.
	// Tests move it to reach a gate's expiry without waiting.
	Clock func() time.Time
}

// Start serves a fresh engine and returns its listen address. Everything is
// stopped when the test ends.
func Start(t testing.TB, backend string) (addr string) {
	t.Helper()
	return StartWith(t, backend, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, backend string, o Options) (addr string) {
	t.Helper()
	addr, _ = StartRaw(t, backend, o)
	return addr
}

// StartRaw is StartWith that also returns a handle on the engine's store.
func StartRaw(t testing.TB, backend string, o Options) (addr string, raw *Raw) {
	t.Helper()
	var rc *redis.Client
	prefix := "realm"
	switch backend {
	case "redis":
		rc = storetest.ConnectRedis(t)
		prefix = storetest.UniquePrefix(t)
		storetest.CleanupPrefix(t, prefix)
	case "miniredis":
		m := miniredis.RunT(t)
		rc = redis.NewClient(&redis.Options{Addr: m.Addr()})
	default:
		t.Fatalf("enginetest: unknown backend %q (want redis or miniredis)", backend)
	}
	st := store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16})
	gs := grpc.NewServer()
	reg := registry.New(rc, prefix, o.Clock, 10*time.Millisecond)
	eng := engine.New(engine.Options{Store: st, Clock: o.Clock, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(eng.Close)
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	realmv1.RegisterRegistryServiceServer(gs, server.NewRegistry(reg, eng.CheckUsesResources))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		st.Close()
	})
	return lis.Addr().String(), &Raw{st: st, rc: rc}
}
