//go:build unix

package server_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + sys) this process has used: the
// benchmark's client, the engine and its Redis client, not Redis itself.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
