//go:build !unix

// Package cputime reads the processor time of this process, which benchmarks report beside
// the wall time.
package cputime

import "time"

// Process is 0 where the processor time is not read (see cputime_unix.go).
func Process() time.Duration { return 0 }
