//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuTime is the processor time this process has used (user and system, all threads): on a
// machine shared with other work it measures a step's work far more steadily than the wall
// clock, when ggml's threads do not outnumber the free cores (their barriers spin).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
