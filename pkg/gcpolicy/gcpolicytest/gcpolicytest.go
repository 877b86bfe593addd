// Package gcpolicytest runs a benchmark under a service's GC target.
package gcpolicytest

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/realm-go/realm/pkg/gcpolicy"
)

// Target sets the GC target to percent as a service sets it
// (gcpolicy.Apply: GOGC in the environment wins), without a memory limit
// (a cgroup root with none in it), until tb ends. Everything in the
// process shares the setting.
func Target(tb testing.TB, percent int) {
	tb.Helper()
	old := debug.SetGCPercent(-1) // reading it means setting it
	debug.SetGCPercent(old)
	if _, err := gcpolicy.Apply(percent, os.Getenv, tb.TempDir()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { debug.SetGCPercent(old) })
}
