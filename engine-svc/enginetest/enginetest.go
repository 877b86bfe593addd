// Package enginetest starts a real engine for other modules' tests: a store
// over real Redis or miniredis, the engine, and its gRPC server on a
// loopback socket, as engine-svc's own tests do.
package enginetest

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/inprocess"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
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
	opts := inprocess.Options{Clock: o.Clock, Prefix: "realm"}
	var rc redis.UniversalClient
	switch backend {
	case "redis":
		rc = storetest.ConnectRedis(t)
		opts.Prefix = storetest.UniquePrefix(t)
		storetest.CleanupPrefix(t, opts.Prefix)
	case "cluster":
		// Not among Backends: for a test that asks for the Redis Cluster
		// at $REDIS_CLUSTER_ADDRS by name.
		rc = storetest.ConnectCluster(t)
		opts.Prefix = storetest.UniquePrefix(t)
		storetest.CleanupClusterPrefix(t, opts.Prefix)
	case "miniredis":
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		rc = c
	default:
		t.Fatalf("enginetest: unknown backend %q (want redis, miniredis or cluster)", backend)
	}
	opts.Redis = rc
	e, err := inprocess.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	// Raw's own store over the same keys: it only names keys and reads.
	st := store.NewRedis(rc, store.Options{Prefix: opts.Prefix, Buckets: inprocess.Buckets})
	return e.Addr(), &Raw{st: st, rc: rc}
}
