package runner

import (
	"testing"
	"time"
)

func TestBackoffDoublesWithinItsCap(t *testing.T) {
	t.Parallel()
	base, maxWait := 100*time.Millisecond, time.Second
	tests := []struct {
		attempt  int
		lo, high time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{50, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		for range 100 { // jitter: every draw stays in range
			if got := backoff(tt.attempt, base, maxWait); got < tt.lo || got > tt.high {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.attempt, got, tt.lo, tt.high)
			}
		}
	}
}

func TestDefaultsReadTheEngineAddressFromTheEnvironment(t *testing.T) {
	// Not parallel: it sets an environment variable.
	tests := []struct {
		name, env, given, want string
	}{
		{"the option wins", "10.0.0.1:7070", "engine:7070", "engine:7070"},
		{"then the environment", "10.0.0.1:7070", "", "10.0.0.1:7070"},
		{"then the default", "", "", DefaultEngineAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EngineAddrEnv, tt.env)
			o := Options{EngineAddr: tt.given}.withDefaults()
			if o.EngineAddr != tt.want {
				t.Errorf("EngineAddr = %q, want %q", o.EngineAddr, tt.want)
			}
			if o.Listen != DefaultListen || o.Lease != DefaultLease || o.Name == "" || o.Logger == nil {
				t.Errorf("defaults not applied: %+v", o)
			}
		})
	}
}
