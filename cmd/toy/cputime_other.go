//go:build !unix

package main

import "time"

// cpuTime is 0 where the processor time is not read (see cputime_unix.go).
func cpuTime() time.Duration { return 0 }
