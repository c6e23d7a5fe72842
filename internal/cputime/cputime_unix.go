//go:build unix

// Package cputime reads the processor time of this process, which benchmarks report beside
// the wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process is the processor time this process has used (user and system, all threads): on a
// machine shared with other work it measures a step's work far more steadily than the wall
// clock, when ggml's threads do not outnumber the free cores (their barriers spin).
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
