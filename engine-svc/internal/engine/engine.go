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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
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
}

// Engine serves every act on runs and workflows. It is safe for concurrent
// use and keeps no state that another replica would need: the run cache is
// an optimisation that the store's compare-and-set keeps honest.
type Engine struct {
	st    store.Store
	now   func() time.Time
	log   *slog.Logger
	defs  *defCache
	runs  *runCache
	reg   *registry.Registry
	conns *connPool
	m     *instruments
	// drives counts the calls running handlers (see WaitDrives).
	drives sync.WaitGroup

	// claimWindow is Options.ClaimWindow (0: the spec's rule).
	claimWindow time.Duration
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
	if o.RunCacheSize == 0 {
		o.RunCacheSize = 4096
	}
	return &Engine{
		st:    o.Store,
		now:   o.Clock,
		log:   o.Logger,
		defs:  newDefCache(o.DefinitionTTL),
		runs:  &runCache{max: o.RunCacheSize, m: map[string]*decoded{}},
		reg:   o.Registry,
		conns: &connPool{opts: o.RunnerDialOptions},
		m:     newInstruments(o.Metrics),

		claimWindow: o.ClaimWindow,
	}
}

// maxWriteAttempts bounds how often one act retries after losing a race.
const maxWriteAttempts = 16

// errRunNotFound is returned by update when the run does not exist.
var errRunNotFound = errors.New("run not found")

// errWorkflowMissing wraps a definition that cannot be read.
type errWorkflowMissing struct{ id string }

func (e *errWorkflowMissing) Error() string {
	return fmt.Sprintf("Workflow not found: %s", e.id)
}

// update is the single write path. fn reads and changes t; when it marked
// the transaction written, the change is committed with one compare-and-set
// on run_version. On a conflict the run is reloaded and fn runs again.
func (e *Engine) update(ctx context.Context, runID string, fn func(t *txn) error) (*txn, error) {
	fresh := false
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		// A decision that writes nothing (a refusal, "nothing to do") has
		// no compare-and-set to catch a cached copy another replica has
		// overtaken, so it is made again on the store's copy.
		snap, cached, err := e.snapshot(ctx, runID, fresh)
		if err != nil {
			return nil, err
		}
		t, err := e.begin(ctx, snap)
		if err != nil {
			return nil, err
		}
		if err := fn(t); err != nil {
			if cached {
				fresh = true
				continue
			}
			return t, err
		}
		if !t.dirty {
			if cached {
				fresh = true
				continue
			}
			return t, nil
		}
		err = e.commit(ctx, t)
		if store.IsConflict(err) {
			fresh = true
			continue
		}
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, errcode.Newf(errcode.StateSnapshotMismatch,
		"Run '%s' kept changing under this call (%d attempts); call get_run_state and try again.", runID, maxWriteAttempts)
}

// read loads a run for a reader (never from the cache: a reader must see
// what other replicas wrote).
func (e *Engine) read(ctx context.Context, runID string) (*txn, error) {
	snap, _, err := e.snapshot(ctx, runID, true)
	if err != nil {
		return nil, err
	}
	return e.begin(ctx, snap)
}

// snapshot returns the run, from the cache unless fresh, and whether it
// came from the cache.
func (e *Engine) snapshot(ctx context.Context, runID string, fresh bool) (*decoded, bool, error) {
	if !fresh {
		if d := e.runs.get(runID); d != nil {
			return d, true, nil
		}
	}
	s, err := e.st.LoadRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, errRunNotFound
	}
	if err != nil {
		return nil, false, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	d, err := decode(s)
	if err != nil {
		return nil, false, err
	}
	e.runs.put(runID, d)
	return d, false, nil
}

// decoded is a snapshot decoded once: the cache hands out clones of it.
type decoded struct {
	snap    *store.Snapshot
	run     *record.Run
	outputs map[string]any
	traces  map[string][]byte // buffered trace entries by step (raw JSON)
	// attempts is the stored refused-answers list (raw JSON), nil if none.
	attempts []byte
}

func decode(snap *store.Snapshot) (*decoded, error) {
	var r record.Run
	if err := json.Unmarshal(snap.Doc, &r); err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
	}
	r.Version = snap.Version
	r.Normalize()
	outputs := make(map[string]any, len(snap.Outputs))
	traces := map[string][]byte{}
	var attempts []byte
	for step, raw := range snap.Outputs {
		if step == attemptsField {
			attempts = raw
			continue
		}
		if name, ok := strings.CutPrefix(step, traceField); ok {
			traces[name] = raw
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to load run from store: "+err.Error())
		}
		outputs[step] = v
	}
	return &decoded{snap: snap, run: &r, outputs: outputs, traces: traces, attempts: attempts}, nil
}

// begin starts a transaction on a decoded snapshot. The run is cloned and
// the outputs map copied, so the cached copy is never changed; recorded
// outputs themselves are never changed in place.
func (e *Engine) begin(ctx context.Context, d *decoded) (*txn, error) {
	t := &txn{e: e, ctx: ctx, run: d.run.Clone(), outputs: maps.Clone(d.outputs), traces: maps.Clone(d.traces), now: e.now(), base: d.snap, wasTerminal: d.run.Terminal(), attempts: d.attempts}
	def, err := e.definition(ctx, t.run.WorkflowID)
	if err != nil {
		var missing *errWorkflowMissing
		if !errors.As(err, &missing) {
			return nil, err
		}
		t.defErr = err
	} else {
		t.def = def
	}
	return t, nil
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
	return hex.EncodeToString(sum[:])
}

// runCache is the versioned run cache: a snapshot is used only as a guess;
// a stale one is refused by the store's compare-and-set and reloaded.
type runCache struct {
	mu  sync.Mutex
	max int
	m   map[string]*decoded
}

func (c *runCache) get(id string) *decoded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

func (c *runCache) put(id string, s *decoded) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		// Dropping everything is crude but bounded; the cache only saves
		// a round trip, it is never the source of truth.
		clear(c.m)
	}
	c.m[id] = s
}

func (c *runCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
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
