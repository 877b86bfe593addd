//go:build !unix

// Package proccpu reads the CPU time this process has used, for the
// benchmarks that report CPU per operation (docs/benchmarks.md).
package proccpu

import "time"

// Used is not measured off unix (getrusage): it is always 0, which the
// benchmarks read as "leave the metric out".
func Used() time.Duration { return 0 }
