//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + sys) this process has used: the MCP
// clients, the servers and, unless it runs apart, the engine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
