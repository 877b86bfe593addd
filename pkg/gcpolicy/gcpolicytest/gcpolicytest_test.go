package gcpolicytest_test

import (
	"runtime/debug"
	"testing"

	"github.com/realm-go/realm/pkg/gcpolicy/gcpolicytest"
)

func TestTargetHoldsUntilTheTestEndsAndIsThenRestored(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(-1)
	debug.SetGCPercent(before)
	t.Run("inner", func(t *testing.T) {
		gcpolicytest.Target(t, 250)
		got := debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got != 250 {
			t.Errorf("target %d during the test, want 250", got)
		}
	})
	after := debug.SetGCPercent(-1)
	debug.SetGCPercent(after)
	if after != before {
		t.Errorf("target %d after the test, want %d restored", after, before)
	}
}
