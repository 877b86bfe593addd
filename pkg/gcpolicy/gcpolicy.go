// Package gcpolicy sets a service's garbage collector: a GC target (what
// GOGC sets) and a soft memory limit (what GOMEMLIMIT sets) taken from the
// memory limit of the container the service runs in. The environment's
// GOGC and GOMEMLIMIT, when set, win.
//
// Why: engine-svc's and mcp-svc's live heaps are small (a few MB to tens:
// the engine's run cache) and they allocate on every call, so Go's default
// target (100) collects often; at 400 the engine spends a quarter less CPU
// per transition and the MCP door a third less per call
// (docs/benchmarks.md, "2026-12-07"). The heap may then grow to five times
// the live data between collections, so the soft limit makes the
// collector work harder before the container's limit is reached.
package gcpolicy

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultPercent is engine-svc's and mcp-svc's GC target.
const DefaultPercent = 400

// MinPercent and MaxPercent bound the target a flag may set.
const (
	MinPercent = 10
	MaxPercent = 10000
)

// limitShare is the part of the container's memory limit the heap may
// use before the collector works harder: the rest is for goroutine
// stacks, the runtime and the kernel's own accounting.
const limitShare = 0.9

// Applied is what Apply set, and where each value came from.
type Applied struct {
	Percent     int
	PercentFrom string // "GOGC" or "flag"
	// Limit is the soft memory limit in bytes (math.MaxInt64: none).
	Limit     int64
	LimitFrom string // "GOMEMLIMIT", the cgroup file it was read from, or "none"
}

// Apply sets the GC target to percent unless GOGC is set, and a soft
// memory limit of 90% of the cgroup memory limit found under cgroupRoot
// (normally /sys/fs/cgroup; v2's memory.max, or v1's
// memory/memory.limit_in_bytes) unless GOMEMLIMIT is set or no limit is
// found.
func Apply(percent int, getenv func(string) string, cgroupRoot string) (Applied, error) {
	var a Applied
	fromEnv := getenv("GOGC") != ""
	if !fromEnv && (percent < MinPercent || percent > MaxPercent) {
		return a, fmt.Errorf("GC target %d: want %d to %d (GOGC in the environment, when set, takes its place)", percent, MinPercent, MaxPercent)
	}
	// Everything is read before anything is set: a refusal changes nothing.
	var limit int64
	var from string
	if getenv("GOMEMLIMIT") == "" {
		var err error
		if limit, from, err = cgroupLimit(cgroupRoot); err != nil {
			return a, err
		}
	}
	if fromEnv {
		// The runtime read it at start; report what it set.
		a.Percent, a.PercentFrom = currentPercent(), "GOGC"
	} else {
		debug.SetGCPercent(percent)
		a.Percent, a.PercentFrom = percent, "flag"
	}
	switch {
	case getenv("GOMEMLIMIT") != "":
		a.Limit, a.LimitFrom = debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	case from == "":
		a.Limit, a.LimitFrom = debug.SetMemoryLimit(-1), "none"
	default:
		a.Limit, a.LimitFrom = int64(float64(limit)*limitShare), from
		debug.SetMemoryLimit(a.Limit)
	}
	return a, nil
}

// currentPercent reads the GC target without changing it.
func currentPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// cgroupLimit reads the memory limit of the cgroup at root; from is empty
// when there is none (no file, or no limit set).
func cgroupLimit(root string) (limit int64, from string, err error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		path := filepath.Join(root, name)
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("read memory limit: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, "", nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, "", fmt.Errorf("read memory limit: %s holds %q, want a byte count or max", path, v)
		}
		if n >= math.MaxInt64/2 { // cgroup v1's "no limit" is a page-rounded MaxInt64
			return 0, "", nil
		}
		return n, path, nil
	}
	return 0, "", nil
}
