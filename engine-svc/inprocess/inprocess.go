// Package inprocess runs a whole engine inside the calling process: the
// engine, its capability registry and its gRPC server on a loopback port,
// over a store of its own. It is what `realm workflow test` and
// engine-svc/realmtest drive, so a workflow author needs no engine service, and
// what other modules' tests start (enginetest).
//
// The default store is a fresh in-memory Redis (miniredis) that is never
// written to disk: closing the engine forgets every run.
package inprocess

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Options change the engine Start serves. The zero value is a fresh
// in-memory store and the real clock.
type Options struct {
	// Redis is the store's server; nil starts a fresh miniredis that lives
	// as long as the engine.
	Redis redis.UniversalClient
	// Prefix namespaces every key (default "realm"); tests sharing one
	// Redis give each engine its own.
	Prefix string
	// Clock is the engine's time; nil is time.Now.
	Clock func() time.Time
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
}

// Buckets is the number of index buckets the store spreads runs over.
const Buckets = 16

// Engine is a running in-process engine.
type Engine struct {
	addr  string
	conn  *grpc.ClientConn
	close func()
	once  sync.Once
}

// Start serves a new engine on 127.0.0.1 (a free port). Close stops it.
func Start(o Options) (*Engine, error) {
	var stopRedis func()
	rc := o.Redis
	if rc == nil {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("inprocess: start the in-memory store: %w", err)
		}
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		rc = c
		stopRedis = func() { _ = c.Close(); m.Close() }
	}
	if o.Prefix == "" {
		o.Prefix = "realm"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st := store.NewRedis(rc, store.Options{Prefix: o.Prefix, Buckets: Buckets})
	reg := registry.New(rc, o.Prefix, o.Clock, 10*time.Millisecond)
	eng := engine.New(engine.Options{Store: st, Clock: o.Clock, Registry: reg, Logger: o.Logger})
	gs := grpc.NewServer(server.GRPCOptions()...)
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	realmv1.RegisterRegistryServiceServer(gs, server.NewRegistry(reg, eng.CheckUsesResources))

	stop := func() {
		gs.Stop()
		// Calls that were cut off still write their outcome: let them,
		// before the store goes away under them.
		eng.WaitDrives(5 * time.Second)
		eng.Close()
		st.Close()
		if stopRedis != nil {
			stopRedis()
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return nil, fmt.Errorf("inprocess: listen: %w", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		<-served
		return nil, fmt.Errorf("inprocess: connect: %w", err)
	}
	return &Engine{
		addr: lis.Addr().String(),
		conn: conn,
		close: func() {
			_ = conn.Close()
			stop()
			<-served
		},
	}, nil
}

// Addr is the engine's gRPC address: runners register here
// (REALM_ENGINE_ADDR), and clients call it.
func (e *Engine) Addr() string { return e.addr }

// Engine is a client of the engine's EngineService.
func (e *Engine) Engine() realmv1.EngineServiceClient { return realmv1.NewEngineServiceClient(e.conn) }

// Registry is a client of the engine's capability registry.
func (e *Engine) Registry() realmv1.RegistryServiceClient {
	return realmv1.NewRegistryServiceClient(e.conn)
}

// Close stops the engine and forgets its in-memory store. It is safe to
// call more than once.
func (e *Engine) Close() {
	if e == nil {
		return
	}
	e.once.Do(e.close)
}
