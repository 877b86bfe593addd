package webhook

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/realm-go/realm/listen-svc/trigger"
)

// limiters holds one token bucket per mount and limit. It is this
// process's own: with N replicas behind a balancer a trigger gets up to N
// times its limit.
type limiters struct {
	mu sync.Mutex
	by map[string]*rate.Limiter
}

// wait says how long the caller must wait before a request to m is
// served, or 0 when it is served now (taking a token). A trigger's own
// rate_limit wins over def; neither (or `rate_limit: false`) is no limit.
func (l *limiters) wait(m *Mount, def *trigger.RateLimit, now time.Time) time.Duration {
	rl := m.Trigger.RateLimit
	if rl == nil {
		rl = def
	}
	if rl == nil || rl.Off || rl.PerSecond <= 0 {
		return 0
	}
	// The key carries the limit, so a workflow registered again with
	// another limit gets a fresh bucket.
	k := m.Path + "\x00" + strconv.FormatFloat(rl.PerSecond, 'g', -1, 64) + "\x00" + strconv.Itoa(rl.Burst)
	l.mu.Lock()
	if l.by == nil {
		l.by = map[string]*rate.Limiter{}
	}
	lim := l.by[k]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(rl.PerSecond), max(rl.Burst, 1))
		l.by[k] = lim
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
