// Package ratelimit is the adapter runner's client-side throttle (spec §3.4
// rate_limit): one token bucket per service, kept in this process only, so
// two runners serving one service each have their own buckets. A service
// that answered "too many requests" can also be paused until the wait it
// named has passed, which holds back every call to it, not only the one
// that was refused.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Clock is the time source of the limiter (and of the waits the adapters
// make after a 429). Tests inject a fake one; no test measures wall time.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or ctx's end (its error then).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx's end.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Bucket is a token bucket's settings: RequestsPerSecond calls per second
// are let through, Burst of them at once before waiting starts. A
// RequestsPerSecond of 0 or less means no throttling.
type Bucket struct {
	RequestsPerSecond float64
	Burst             float64
}

// capacity is the burst, at least one call (a burst below 1 would never
// let a call through).
func (b Bucket) capacity() float64 {
	return math.Max(1, b.Burst)
}

// Limiters holds the buckets of every service this process calls, by key.
// The zero value is not usable; use New.
type Limiters struct {
	clock   Clock
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	settings  Bucket
	tokens    float64
	last      time.Time
	notBefore time.Time
}

// New returns empty limiters on clock (SystemClock when nil).
func New(clock Clock) *Limiters {
	if clock == nil {
		clock = SystemClock{}
	}
	return &Limiters{clock: clock, buckets: map[string]*bucket{}}
}

// Clock returns the limiters' clock.
func (l *Limiters) Clock() Clock { return l.clock }

// Wait takes one call's token from key's bucket, sleeping until the bucket
// lets the call through and any pause of key has passed. Calls are served
// in the order they arrive (a token is reserved before the sleep, so
// concurrent callers queue rather than race). It returns ctx's error when
// ctx ends first. Changed settings for a key start a fresh, full bucket.
func (l *Limiters) Wait(ctx context.Context, key string, b Bucket) error {
	wait := l.reserve(key, b)
	if wait <= 0 {
		return ctx.Err()
	}
	return l.clock.Sleep(ctx, wait)
}

// Pause holds back every call to key until until (a later pause wins over
// an earlier one).
func (l *Limiters) Pause(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk := l.bucketLocked(key, Bucket{}, false)
	if until.After(bk.notBefore) {
		bk.notBefore = until
	}
}

// PausedFor is how long key stays paused (0 when it is not).
func (l *Limiters) PausedFor(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk, ok := l.buckets[key]
	if !ok {
		return 0
	}
	return max(bk.notBefore.Sub(l.clock.Now()), 0)
}

// reserve takes a token and returns how long the caller must wait first.
func (l *Limiters) reserve(key string, b Bucket) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	bk := l.bucketLocked(key, b, true)
	var wait time.Duration
	if b.RequestsPerSecond > 0 {
		capacity := b.capacity()
		if elapsed := now.Sub(bk.last).Seconds(); elapsed > 0 {
			bk.tokens = math.Min(capacity, bk.tokens+elapsed*b.RequestsPerSecond)
			bk.last = now
		}
		bk.tokens--
		if bk.tokens < 0 {
			wait = time.Duration(-bk.tokens / b.RequestsPerSecond * float64(time.Second))
		}
	}
	if paused := bk.notBefore.Sub(now); paused > wait {
		wait = paused
	}
	return wait
}

// bucketLocked returns key's bucket, creating it full; with settings true a
// bucket whose settings differ from b is refilled under b.
func (l *Limiters) bucketLocked(key string, b Bucket, settings bool) *bucket {
	bk, ok := l.buckets[key]
	if !ok {
		bk = &bucket{settings: b, tokens: b.capacity(), last: l.clock.Now()}
		l.buckets[key] = bk
		return bk
	}
	if settings && bk.settings != b {
		bk.settings, bk.tokens, bk.last = b, b.capacity(), l.clock.Now()
	}
	return bk
}
