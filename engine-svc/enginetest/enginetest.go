// Package enginetest starts a real engine for other modules' tests: a store
// over real Redis or miniredis, the engine, and its gRPC server on a
// loopback socket, as engine-svc's own tests do.
package enginetest

import (
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/inprocess"
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
	opts := inprocess.Options{Clock: o.Clock}
	switch backend {
	case "redis":
		opts.Redis = storetest.ConnectRedis(t)
		opts.Prefix = storetest.UniquePrefix(t)
		storetest.CleanupPrefix(t, opts.Prefix)
	case "miniredis":
		// inprocess starts a fresh one of its own.
	default:
		t.Fatalf("enginetest: unknown backend %q (want redis or miniredis)", backend)
	}
	e, err := inprocess.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e.Addr()
}
