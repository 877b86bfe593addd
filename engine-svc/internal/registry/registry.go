// Package registry is the capability registry: the handler runners that are
// alive and the handlers and adapters each serves. It lives in Redis, so
// every engine replica sees the same registry; a runner stays registered
// while it renews its lease.
//
//	realm:{reg}:runners        zset: runner id -> lease expiry (ms)
//	realm:{reg}:runner:<id>    string: the runner as JSON, expiring with its lease
//
// The {reg} hash tag keeps the registry in one Cluster slot.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ErrNotFound is returned for a runner id the registry does not hold (its
// lease ran out, or it never registered): the runner registers again.
var ErrNotFound = errors.New("registry: runner not registered")

// Handler is one handler a runner serves.
type Handler struct {
	Name          string   `json:"name"`
	UsesResources []string `json:"uses_resources,omitempty"`
}

// AdapterSpec is what a runner declares about one adapter it serves.
type AdapterSpec struct {
	Name string `json:"name"`
	// ConfigSchema is the JSON text of its config_schema (spec §13.1);
	// empty when it declares none.
	ConfigSchema string `json:"config_schema,omitempty"`
}

// Runner is a registered handler runner.
type Runner struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Endpoint string    `json:"endpoint"`
	Handlers []Handler `json:"handlers"`
	Adapters []string  `json:"adapters,omitempty"`
	// AdapterSpecs are the adapters' declarations; absent in records of
	// runners that sent only names (their config_schema is unknown).
	AdapterSpecs []AdapterSpec `json:"adapter_specs,omitempty"`
	Expires      time.Time     `json:"expires"`
	// Owner is the name on the certificate that registered the runner
	// (mutual TLS): only it may renew or deregister the runner.
	Owner string `json:"owner,omitempty"`
	// LeaseMS is the lease the runner registered with, which every
	// renewal grants again (0 in records written before it was kept).
	LeaseMS int64 `json:"lease_ms,omitempty"`
}

// Has reports whether the runner serves a handler.
func (r *Runner) Has(handler string) bool {
	return slices.ContainsFunc(r.Handlers, func(h Handler) bool { return h.Name == handler })
}

// HasAdapter reports whether the runner serves an adapter.
func (r *Runner) HasAdapter(adapter string) bool { return slices.Contains(r.Adapters, adapter) }

// AdapterSpec is what the runner declared about an adapter; false when it
// declared nothing (a runner that sent only names).
func (r *Runner) AdapterSpec(adapter string) (AdapterSpec, bool) {
	i := slices.IndexFunc(r.AdapterSpecs, func(s AdapterSpec) bool { return s.Name == adapter })
	if i < 0 {
		return AdapterSpec{}, false
	}
	return r.AdapterSpecs[i], true
}

// Registry reads and writes the registry.
type Registry struct {
	c      redis.UniversalClient
	prefix string
	now    func() time.Time
	ttl    time.Duration

	mu       sync.Mutex
	cached   []*Runner
	cachedAt time.Time
	next     atomic.Uint64 // round-robin among runners of one capability
}

// New returns a registry under prefix (default "realm"). Reads of the live
// set are cached for cacheTTL (0 = 1s): a runner that registers is seen by
// every replica within it, and at once by the replica it registered with.
func New(c redis.UniversalClient, prefix string, now func() time.Time, cacheTTL time.Duration) *Registry {
	if prefix == "" {
		prefix = "realm"
	}
	if now == nil {
		now = time.Now
	}
	if cacheTTL == 0 {
		cacheTTL = time.Second
	}
	return &Registry{c: c, prefix: prefix, now: now, ttl: cacheTTL}
}

func (g *Registry) setKey() string             { return g.prefix + ":{reg}:runners" }
func (g *Registry) runnerKey(id string) string { return g.prefix + ":{reg}:runner:" + id }

// Register records a runner with a lease and returns it with its id.
func (g *Registry) Register(ctx context.Context, r Runner, lease time.Duration) (*Runner, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("registry: lease must be positive")
	}
	r.ID = uuid.NewString()
	r.Expires = g.now().Add(lease)
	r.LeaseMS = lease.Milliseconds()
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	_, err = g.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, g.runnerKey(r.ID), b, lease)
		p.ZAdd(ctx, g.setKey(), redis.Z{Score: float64(r.Expires.UnixMilli()), Member: r.ID})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: register: %w", err)
	}
	g.invalidate()
	return &r, nil
}

// renewScript extends a lease only while the runner is still registered.
var renewScript = redis.NewScript(`
local doc = redis.call('GET', KEYS[1])
if not doc then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
`)

// Renew extends a runner's lease by the lease it registered with (by
// fallback for a record that does not say). ErrNotFound when it has lapsed.
func (g *Registry) Renew(ctx context.Context, id string, fallback time.Duration) (time.Time, error) {
	raw, err := g.c.Get(ctx, g.runnerKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("registry: renew: %w", err)
	}
	var r Runner
	if err := json.Unmarshal(raw, &r); err != nil {
		return time.Time{}, fmt.Errorf("registry: renew: %w", err)
	}
	lease := time.Duration(r.LeaseMS) * time.Millisecond
	if lease <= 0 {
		lease = fallback
	}
	r.Expires = g.now().Add(lease)
	b, _ := json.Marshal(r)
	ok, err := renewScript.Run(ctx, g.c, []string{g.runnerKey(id), g.setKey()},
		b, strconv.FormatInt(lease.Milliseconds(), 10), float64(r.Expires.UnixMilli()), id).Int()
	if err != nil {
		return time.Time{}, fmt.Errorf("registry: renew: %w", err)
	}
	if ok == 0 {
		return time.Time{}, ErrNotFound
	}
	return r.Expires, nil
}

// Get is one registered runner, ErrNotFound when its lease has lapsed.
func (g *Registry) Get(ctx context.Context, id string) (*Runner, error) {
	raw, err := g.c.Get(ctx, g.runnerKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("registry: get: %w", err)
	}
	var r Runner
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("registry: get: %w", err)
	}
	return &r, nil
}

// Deregister removes a runner at once.
func (g *Registry) Deregister(ctx context.Context, id string) error {
	_, err := g.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, g.runnerKey(id))
		p.ZRem(ctx, g.setKey(), id)
		return nil
	})
	g.invalidate()
	if err != nil {
		return fmt.Errorf("registry: deregister: %w", err)
	}
	return nil
}

func (g *Registry) invalidate() {
	g.mu.Lock()
	g.cached, g.cachedAt = nil, time.Time{}
	g.mu.Unlock()
}

// Live returns the runners whose lease has not passed.
func (g *Registry) Live(ctx context.Context) ([]*Runner, error) {
	now := g.now()
	g.mu.Lock()
	if g.cached != nil && now.Sub(g.cachedAt) < g.ttl {
		out := g.cached
		g.mu.Unlock()
		return liveAt(out, now), nil
	}
	g.mu.Unlock()
	ids, err := g.c.ZRangeByScore(ctx, g.setKey(), &redis.ZRangeBy{Min: strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("registry: live: %w", err)
	}
	runners := []*Runner{}
	if len(ids) > 0 {
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = g.runnerKey(id)
		}
		vals, err := g.c.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("registry: live: %w", err)
		}
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue // lapsed between the two reads
			}
			var r Runner
			if json.Unmarshal([]byte(s), &r) == nil {
				runners = append(runners, &r)
			}
		}
	}
	// Lapsed members are dropped from the set as a side effect of reading.
	g.c.ZRemRangeByScore(ctx, g.setKey(), "-inf", "("+strconv.FormatInt(now.UnixMilli(), 10))
	g.mu.Lock()
	g.cached, g.cachedAt = runners, now
	g.mu.Unlock()
	return runners, nil
}

func liveAt(rs []*Runner, now time.Time) []*Runner {
	out := make([]*Runner, 0, len(rs))
	for _, r := range rs {
		if r.Expires.After(now) {
			out = append(out, r)
		}
	}
	return out
}

// Has reports whether a live runner serves a handler (adapter when adapter
// is true), without taking a turn.
func (g *Registry) Has(ctx context.Context, name string, adapter bool) (bool, error) {
	live, err := g.Live(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range live {
		if (!adapter && r.Has(name)) || (adapter && r.HasAdapter(name)) {
			return true, nil
		}
	}
	return false, nil
}

// Pick returns a live runner that serves a handler (adapter when adapter is
// true), taking turns among several so they share the load; nil when none.
func (g *Registry) Pick(ctx context.Context, name string, adapter bool) (*Runner, error) {
	live, err := g.Live(ctx)
	if err != nil {
		return nil, err
	}
	var fit []*Runner
	for _, r := range live {
		if (!adapter && r.Has(name)) || (adapter && r.HasAdapter(name)) {
			fit = append(fit, r)
		}
	}
	if len(fit) == 0 {
		return nil, nil
	}
	slices.SortFunc(fit, func(a, b *Runner) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return fit[int(g.next.Add(1)-1)%len(fit)], nil
}
