// Package cpupeak estimates the single-precision peak of this machine's cores: the FMA
// throughput the hardware could reach, against which a GEMM's or a training step's GFLOP/s is
// a utilisation.
//
// The peak of one core is clock × f32 lanes per vector × FMA units × 2 (an FMA is two
// floating-point operations). The clock is measured, in Go, by timing a chain of dependent
// one-cycle integer operations (add and xor alternately, which no compiler folds): each takes
// one cycle, so operations per second is the clock the core actually runs at, turbo and
// throttling included. The best of many short trials is kept, so that a busy machine, whose
// trials lose time slices, still reads the clock. The vector width and the FMA units come from
// the CPU's identity (Linux /proc/cpuinfo): AVX-512 gives 16 lanes on cores with a 512-bit
// datapath, AVX2/FMA 8; x86 cores have two FMA units; arm64 cores are taken as two 128-bit
// NEON units. These are the documented figures of current cores, not a measurement: Peak.Basis
// says which rule applied.
package cpupeak

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Peak is the estimated single-precision peak of one core.
type Peak struct {
	// ClockGHz is the measured clock of a core, in GHz.
	ClockGHz float64
	// Lanes is the number of f32 lanes an FMA instruction computes per cycle and unit.
	Lanes int
	// FMAUnits is the number of FMA units per core.
	FMAUnits int
	// Basis names the CPU and the rule that gave Lanes and FMAUnits.
	Basis string
}

// FlopsPerCycle is the f32 operations one core can do per cycle: 2 × lanes × FMA units.
func (p Peak) FlopsPerCycle() int { return 2 * p.Lanes * p.FMAUnits }

// GFLOPS is the peak of threads cores, in GFLOP/s.
func (p Peak) GFLOPS(threads int) float64 {
	return float64(threads) * p.ClockGHz * float64(p.FlopsPerCycle())
}

// String describes the peak of threads cores and how it was found.
func (p Peak) String(threads int) string {
	return fmt.Sprintf("%.1f GFLOP/s = %d cores × %.2f GHz (measured) × %d f32 lanes × %d FMA units × 2 (%s)",
		p.GFLOPS(threads), threads, p.ClockGHz, p.Lanes, p.FMAUnits, p.Basis)
}

// Measure measures the clock (for about d) and reads the vector units of this machine's CPU.
func Measure(d time.Duration) Peak {
	p := Units(runtime.GOARCH, readCPUInfo())
	p.ClockGHz = MeasureClock(d)
	return p
}

// readCPUInfo returns the text of /proc/cpuinfo, or "" where there is none.
func readCPUInfo() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return string(b)
}

// Units decides the f32 lanes and FMA units per core of a CPU from its architecture and, on
// x86, the first processor's entry in /proc/cpuinfo (vendor, family, flags).
func Units(goarch, cpuinfo string) Peak {
	if goarch == "arm64" {
		return Peak{Lanes: 4, FMAUnits: 2, Basis: "arm64: two 128-bit NEON FMA units assumed"}
	}
	if goarch != "amd64" {
		return Peak{Lanes: 1, FMAUnits: 1, Basis: goarch + ": one scalar FMA assumed"}
	}
	fields := map[string]string{}
	for _, line := range strings.Split(cpuinfo, "\n") {
		if strings.TrimSpace(line) == "" && len(fields) > 0 {
			break // the first processor only
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	flags := map[string]bool{}
	for _, f := range strings.Fields(fields["flags"]) {
		flags[f] = true
	}
	family, _ := strconv.Atoi(fields["cpu family"])
	name := fields["model name"]
	if name == "" {
		name = "x86-64"
	}
	switch {
	case flags["avx512f"] && fields["vendor_id"] == "AuthenticAMD" && family < 0x1a:
		// Zen 4 runs AVX-512 on a 256-bit datapath.
		return Peak{Lanes: 8, FMAUnits: 2, Basis: name + ", AMD family " + strconv.Itoa(family) + ": AVX-512 on two 256-bit FMA units"}
	case flags["avx512f"]:
		return Peak{Lanes: 16, FMAUnits: 2, Basis: name + " (family " + strconv.Itoa(family) + "): AVX-512, two 512-bit FMA units"}
	case flags["fma"] && flags["avx2"]:
		return Peak{Lanes: 8, FMAUnits: 2, Basis: name + ": AVX2, two 256-bit FMA units"}
	}
	return Peak{Lanes: 4, FMAUnits: 1, Basis: name + ": SSE, no FMA: one 128-bit multiply-add assumed"}
}

// chainOps is the number of dependent operations in one iteration of chain.
const chainOps = 8

// chain runs n iterations of chainOps dependent one-cycle operations on x.
//
//go:noinline
func chain(n int, x, a, b uint64) uint64 {
	for i := 0; i < n; i++ {
		x += a
		x ^= b
		x += a
		x ^= b
		x += a
		x ^= b
		x += a
		x ^= b
	}
	return x
}

// sink keeps chain's result alive.
var sink uint64

// MeasureClock measures a core's clock in GHz over about d: the best of many short trials of
// chain (each long enough to dwarf the timer's cost), on a locked OS thread.
func MeasureClock(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 1 << 18         // about half a millisecond at 4 GHz
	sink += chain(n, 1, 3, 5) // warm up: the core leaves its idle state
	best := 0.0
	for start := time.Now(); time.Since(start) < d || best == 0; {
		t0 := time.Now()
		sink += chain(n, sink, 3, 5)
		if s := time.Since(t0).Seconds(); s > 0 {
			best = max(best, chainOps*n/s/1e9)
		}
	}
	return best
}
