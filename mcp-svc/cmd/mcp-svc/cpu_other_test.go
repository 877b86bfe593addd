//go:build !unix

package main

import "time"

// processCPU is not measured off unix (getrusage); 0 leaves the metric out.
func processCPU() time.Duration { return 0 }
