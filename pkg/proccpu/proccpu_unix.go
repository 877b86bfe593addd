//go:build unix

// Package proccpu reads the CPU time this process has used, for the
// benchmarks that report CPU per operation (docs/benchmarks.md).
package proccpu

import (
	"syscall"
	"time"
)

// Used is the CPU time (user + sys) this process has used so far, from
// getrusage; 0 if it cannot be read.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
