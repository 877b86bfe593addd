//go:build unix

package proccpu

import (
	"testing"
	"time"
)

// Spinning for a while shows up as CPU time used.
func TestUsedGrowsWithWork(t *testing.T) {
	before := Used()
	deadline := time.Now().Add(50 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		n++
	}
	if got := Used() - before; got < 20*time.Millisecond {
		t.Fatalf("Used grew by %v over 50 ms of spinning (%d turns), want at least 20 ms", got, n)
	}
}
