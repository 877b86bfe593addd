package webhook

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/realm-go/realm/pkg/trigger"
)

// SharedLimiter keeps rate-limit buckets that every replica of the
// listener draws on (ratelimit.Redis).
type SharedLimiter interface {
	// Take asks bucket name (perSecond requests a second, burst at once)
	// to serve one request: 0 when it is served, else how long until one
	// would be (a refused request takes nothing).
	Take(ctx context.Context, name string, perSecond float64, burst int) (time.Duration, error)
}

// sharedLimitTimeout bounds a shared limiter's answer: a request is not
// held up longer than this by its rate limit.
const sharedLimitTimeout = time.Second

// sharedFailLogEvery spaces the warnings that the shared limiter failed,
// so a Redis outage under load does not log once per request.
const sharedFailLogEvery = 30 * time.Second

// limiters holds one token bucket per mount and limit. Without a shared
// limiter they are the only ones, and this process's own: with N replicas
// behind a balancer a trigger gets up to N times its limit. With one, they
// stand in only while it fails.
type limiters struct {
	mu sync.Mutex
	by map[string]*rate.Limiter
	// loggedAt is when the last shared-limiter failure was logged (unix ns).
	loggedAt atomic.Int64
}

// rateLimited says how long the caller must wait before a request to m is
// served, or 0 when it is served now (taking a token). A trigger's own
// rate_limit wins over the listener's default; neither (or
// `rate_limit: false`) is no limit.
//
// With a shared limiter the bucket is every replica's. When it cannot
// answer (Redis down or slow), the request is limited by this process's
// own bucket instead, and that is logged: never served unlimited, never
// refused for the limiter's fault.
func (s *Server) rateLimited(ctx context.Context, m *Mount) time.Duration {
	rl := m.Trigger.RateLimit
	if rl == nil {
		rl = s.o.RateLimit
	}
	if rl == nil || rl.Off || rl.PerSecond <= 0 {
		return 0
	}
	// The name carries the limit, so a workflow registered again with
	// another limit gets a fresh bucket.
	name := m.Path + "\x00" + strconv.FormatFloat(rl.PerSecond, 'g', -1, 64) + "\x00" + strconv.Itoa(rl.Burst)
	now := s.o.Now()
	if s.o.SharedLimit != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedLimitTimeout)
		d, err := s.o.SharedLimit.Take(ctx, name, rl.PerSecond, rl.Burst)
		cancel()
		if err == nil {
			return d
		}
		if last := s.limits.loggedAt.Load(); now.UnixNano()-last >= int64(sharedFailLogEvery) && s.limits.loggedAt.CompareAndSwap(last, now.UnixNano()) {
			s.o.Log.Warn("webhook: the shared rate limit did not answer; limiting with this replica's own bucket until it does",
				KV{"path", m.Path}, KV{"error", err.Error()})
		}
	}
	return s.limits.local(name, rl, now)
}

// local takes a token from this process's bucket name, or says how long
// until one would be there.
func (l *limiters) local(name string, rl *trigger.RateLimit, now time.Time) time.Duration {
	l.mu.Lock()
	if l.by == nil {
		l.by = map[string]*rate.Limiter{}
	}
	lim := l.by[name]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(rl.PerSecond), max(rl.Burst, 1))
		l.by[name] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now) // a refused request spends no token
	}
	return d
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}

// ParseRateLimit reads --rate-limit: `<per_second>[:<burst>]` (burst
// default: per_second rounded up), or `off` / `0` for no default limit.
func ParseRateLimit(s string) (*trigger.RateLimit, error) {
	if s == "" || s == "off" || s == "0" {
		return nil, nil
	}
	ps, bs, hasBurst := strings.Cut(s, ":")
	block := map[string]any{"type": "webhook", "auth": map[string]any{"mode": "none"}}
	n, err := strconv.ParseFloat(ps, 64)
	if err != nil {
		return nil, errRateLimit
	}
	rl := map[string]any{"per_second": n}
	if hasBurst {
		b, err := strconv.Atoi(bs)
		if err != nil {
			return nil, errRateLimit
		}
		rl["burst"] = float64(b)
	}
	block["rate_limit"] = rl
	// The trigger's own checks, so the flag and the block agree on what
	// a limit may be.
	t, err := trigger.Parse(block)
	if err != nil {
		return nil, errRateLimit
	}
	return t.RateLimit, nil
}

var errRateLimit = errors.New("--rate-limit must be <requests per second>[:<burst>] with both above 0 (e.g. 10:20), or off")
