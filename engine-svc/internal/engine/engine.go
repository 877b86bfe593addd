// Package engine is Realm's engine: it picks eligible steps from a
// workflow's DAG, validates answers, records evidence, runs the auto and
// guard steps it can reach, and composes every reply the front doors carry.
//
// Every change to a run goes through one function, (*Engine).update: load
// the run (or take it from the versioned cache), let a closure decide in Go,
// then write the result with one compare-and-set script. A conflict means
// another caller wrote first: the run is reloaded and the closure decides
// again on what is now there, so two callers racing on one step cannot both
// win and nothing is lost.
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/ratelimit"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// Options configure an Engine.
type Options struct {
	Store store.Store
	// Clock returns the current time; tests inject their own.
	Clock func() time.Time
	// Logger receives structured logs; slog.Default() when nil.
	Logger *slog.Logger
	// Registry is the capability registry; without it only built-in
	// handlers run here.
	Registry *registry.Registry
	// DefinitionTTL bounds how long a definition read from the store is
	// reused before it is read again (re-registration on another replica is
	// seen within it). Registration through this engine is seen at once.
	DefinitionTTL time.Duration
	// RunCacheSize bounds the versioned run cache (0 = 4096 runs).
	RunCacheSize int
	// ClaimWindow, when positive, replaces the spec's claim window (the
	// step's timeout across its attempts plus a minute, at least 15
	// minutes): a test-only way to see a dead holder's claim go stale.
	ClaimWindow time.Duration
	// Metrics, when set, receives the engine's Prometheus instruments.
	Metrics prometheus.Registerer
	// RunnerDialOptions are added to every connection to a runner (e.g.
	// client metrics).
	RunnerDialOptions []grpc.DialOption
	// RateLimits holds the services' rate_limit buckets, shared by every
	// replica on the same Redis. Nil: buckets beside the store's keys when
	// the store is Redis (it always is outside unit tests).
	RateLimits *ratelimit.Redis
	// LeaseRenewEvery, when positive, replaces how often a running
	// finalizer's lease is renewed (a third of the lease): a test-only way
	// to see renewals without waiting ten seconds.
	LeaseRenewEvery time.Duration
	// CheckCache, a test-only check, re-encodes every run the cache hands
	// out and refuses the act (EngineInternal) when it no longer matches
	// the document its commit stored: something changed a committed
	// transaction's run or outputs, which the cache shares.
	CheckCache bool
	// PackAfter is how long an ended run that owes nothing rests before
	// SweepPack packs it (0: DefaultPackAfter; NoPacking: never).
	PackAfter time.Duration
}

// Engine serves every act on runs and workflows. It is safe for concurrent
// use and keeps no state that another replica would need: the run cache is
// an optimisation that the store's compare-and-set keeps honest.
type Engine struct {
	st   store.Store
	now  func() time.Time
	log  *slog.Logger
	defs *defCache
	// carriedDefs are the compiled definitions runs carry, by hash.
	carriedDefs *bounded[*compiled]
	// configSchemas are the adapters' compiled config_schema, by hash of
	// the text the runners registered.
	configSchemas *bounded[*schema.Schema]
	runs          *bounded[*decoded]
	reg           *registry.Registry
	conns         *connPool
	m             *instruments
	// limits are the services' rate_limit buckets (nil: none).
	limits *ratelimit.Redis
	// drives counts the calls running handlers (see WaitDrives).
	drives sync.WaitGroup

	// claimWindow is Options.ClaimWindow (0: the spec's rule).
	claimWindow     time.Duration
	leaseRenewEvery time.Duration
	checkCache      bool
	packAfter       time.Duration
}

// New returns an Engine.
func New(o Options) *Engine {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DefinitionTTL == 0 {
		o.DefinitionTTL = 2 * time.Second
	}
	if o.PackAfter == 0 {
		o.PackAfter = DefaultPackAfter
	}
	if o.RunCacheSize == 0 {
		o.RunCacheSize = 4096
	}
	if r, ok := o.Store.(*store.Redis); ok && o.RateLimits == nil {
		o.RateLimits = ratelimit.NewRedis(r.Client(), r.Prefix()+":rate")
	}
	return &Engine{
		limits:        o.RateLimits,
		st:            o.Store,
		now:           o.Clock,
		log:           o.Logger,
		defs:          newDefCache(o.DefinitionTTL),
		carriedDefs:   newBounded[*compiled](256),
		configSchemas: newBounded[*schema.Schema](256),
		runs:          newBounded[*decoded](o.RunCacheSize),
		reg:           o.Registry,
		conns:         &connPool{opts: o.RunnerDialOptions},
		m:             newInstruments(o.Metrics),

		claimWindow:     o.ClaimWindow,
		leaseRenewEvery: o.LeaseRenewEvery,
		checkCache:      o.CheckCache,
		packAfter:       o.PackAfter,
	}
}

// definition returns the registered copy of a workflow.
func (e *Engine) definition(ctx context.Context, id string) (*compiled, error) {
	now := e.now()
	cached, fresh := e.defs.get(id, now)
	if fresh {
		return cached, nil
	}
	rec, err := e.st.GetWorkflow(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &errWorkflowMissing{id: id}
	}
	if err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load workflow from store: "+err.Error())
	}
	if cached != nil && cached.Stored == rec.Version {
		e.defs.put(id, cached, now) // unchanged: keep the compiled copy
		return cached, nil
	}
	c, err := compile(rec)
	if err != nil {
		return nil, err
	}
	e.defs.put(id, c, now)
	return c, nil
}

// Close releases the engine's connections to runners.
func (e *Engine) Close() { e.conns.Close() }

// hashBytes is the evidence hash: SHA-256 of the output's JSON bytes
// (txn.appendEvidence encodes them).
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte // on the stack: one allocation, the string's
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// bounded is a map of at most max entries, safe for concurrent use. It
// holds what only saves work (the versioned run snapshots, used as a guess
// that the store's compare-and-set refuses when stale; compiled carried
// definitions by hash), never a source of truth, so when full it is
// dropped whole: crude but bounded, and a miss only costs a reload.
type bounded[V any] struct {
	mu  sync.Mutex
	max int
	m   map[string]V
}

func newBounded[V any](max int) *bounded[V] { return &bounded[V]{max: max, m: map[string]V{}} }

func (c *bounded[V]) get(key string) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *bounded[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = v
}

func (c *bounded[V]) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// defCache keeps compiled definitions for a short time.
type defCache struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]defEntry
}

type defEntry struct {
	c       *compiled
	fetched time.Time
}

func newDefCache(ttl time.Duration) *defCache {
	return &defCache{ttl: ttl, m: map[string]defEntry{}}
}

// get returns the cached definition and whether it is still fresh; a
// stale one is returned too, so a refresh can keep it when unchanged.
func (c *defCache) get(id string, now time.Time) (*compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok {
		return nil, false
	}
	return e.c, now.Sub(e.fetched) <= c.ttl
}

func (c *defCache) put(id string, d *compiled, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = defEntry{c: d, fetched: now}
}

func (c *defCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// stepOf returns a step of the definition, or nil.
func (t *txn) stepOf(name string) *workflow.Step {
	if t.def == nil {
		return nil
	}
	return t.def.Def.Steps[name]
}
