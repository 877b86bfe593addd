package ratelimit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

// fakeClock advances only when a caller sleeps or the test says so, and
// records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

func TestBucketLetsTheBurstThroughThenPacesCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		bucket ratelimit.Bucket
		calls  int
		want   []time.Duration // the sleeps, in order
	}{
		{"no throttle without requests_per_second", ratelimit.Bucket{}, 5, nil},
		{"burst defaults to one call", ratelimit.Bucket{RequestsPerSecond: 1}, 3,
			[]time.Duration{time.Second, time.Second}},
		{"a burst of 3 at 2 per second", ratelimit.Bucket{RequestsPerSecond: 2, Burst: 3}, 5,
			[]time.Duration{500 * time.Millisecond, 500 * time.Millisecond}},
		{"a burst below one still lets one call through", ratelimit.Bucket{RequestsPerSecond: 0.5, Burst: 0.2}, 2,
			[]time.Duration{2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			l := ratelimit.New(clock)
			for range tt.calls {
				if err := l.Wait(context.Background(), "svc", tt.bucket); err != nil {
					t.Fatal(err)
				}
			}
			if got := clock.recorded(); !slices.Equal(got, tt.want) {
				t.Errorf("sleeps = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBucketRefillsWithTimeUpToItsBurst(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := ratelimit.New(clock)
	b := ratelimit.Bucket{RequestsPerSecond: 1, Burst: 2}
	for range 2 {
		_ = l.Wait(context.Background(), "svc", b)
	}
	clock.advance(time.Hour) // refills to the burst (2), not 3600
	for range 3 {
		_ = l.Wait(context.Background(), "svc", b)
	}
	if got, want := clock.recorded(), []time.Duration{time.Second}; !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
}

func TestConcurrentCallersQueueForTokens(t *testing.T) {
	t.Parallel()
	clock := &countingClock{fakeClock: newFakeClock()}
	l := ratelimit.New(clock)
	b := ratelimit.Bucket{RequestsPerSecond: 10, Burst: 2}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() { _ = l.Wait(context.Background(), "svc", b) })
	}
	wg.Wait()
	// The clock does not move while they reserve, so 2 go at once and the
	// other 4 each wait their own, distinct turn.
	got := clock.recorded()
	slices.Sort(got)
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
}

// countingClock records sleeps without moving time.
type countingClock struct{ *fakeClock }

func (c *countingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	return ctx.Err()
}

func TestServicesHaveTheirOwnBuckets(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := ratelimit.New(clock)
	b := ratelimit.Bucket{RequestsPerSecond: 1}
	for _, key := range []string{"a", "b", "c"} {
		_ = l.Wait(context.Background(), key, b)
	}
	if got := clock.recorded(); len(got) != 0 {
		t.Errorf("first calls of three services slept %v, want none", got)
	}
}

func TestChangedSettingsStartAFreshBucket(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := ratelimit.New(clock)
	_ = l.Wait(context.Background(), "svc", ratelimit.Bucket{RequestsPerSecond: 1})
	_ = l.Wait(context.Background(), "svc", ratelimit.Bucket{RequestsPerSecond: 5, Burst: 5})
	if got := clock.recorded(); len(got) != 0 {
		t.Errorf("sleeps = %v, want none after the settings changed", got)
	}
}

func TestPauseHoldsBackEveryCallUntilItEnds(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := ratelimit.New(clock)
	l.Pause("svc", clock.Now().Add(7*time.Second))
	l.Pause("svc", clock.Now().Add(2*time.Second)) // an earlier end does not shorten it
	_ = l.Wait(context.Background(), "svc", ratelimit.Bucket{})
	_ = l.Wait(context.Background(), "svc", ratelimit.Bucket{})
	_ = l.Wait(context.Background(), "other", ratelimit.Bucket{})
	if got, want := clock.recorded(), []time.Duration{7 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v (only the first call of svc waits; the pause is over after it)", got, want)
	}
}

func TestWaitReportsTheContextsEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := ratelimit.New(newFakeClock())
	b := ratelimit.Bucket{RequestsPerSecond: 1}
	_ = l.Wait(context.Background(), "svc", b)
	if err := l.Wait(ctx, "svc", b); err == nil {
		t.Error("Wait on an ended context returned nil")
	}
}
