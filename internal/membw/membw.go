// Package membw measures this machine's DRAM read bandwidth: the rate at which the cores
// running a benchmark's threads can stream memory that no cache holds, the ceiling of a
// computation bound by reading its data once (generating a token reads every weight once).
//
// Measure streams a buffer eight times the size of the last-level caches (LastLevelCache, read
// from Linux's sysfs; BufferBytes sizes it: at four times, two threads of a Zen 5 read a
// 32 MiB L3's 128 MiB buffer at up to 95 GB/s, partly from the cache, and 256 MiB or 1 GiB at
// 47–50 GB/s) with the given number of threads, each locked to
// an OS thread and reading its own contiguous share, and keeps the best of as many passes as
// fit a time budget, so that a busy machine, whose passes lose time slices, still reads the
// memory's rate. The buffer is backed by transparent huge pages where Linux allows them, as
// toy's weights are (ggml.Buffer.AdviseHugePages), and every page is written before the passes
// (an untouched page reads the kernel's shared zero page, which stays in the cache).
//
// A pass reads one 8-byte word of every 64-byte cache line, four independent sums at a time:
// the memory delivers whole lines, so this is the DRAM's read rate, and plain Go reaches the
// rate of AVX-512 loads of every byte (measured on a Zen 5 with one thread: 40–44 GB/s for
// both, where Go summing every word is bound by its adds at 33–35 GB/s).
package membw

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// lineWords is the 8-byte words of a 64-byte cache line.
	lineWords = 8
	// pageWords is the words of a 4 KiB page, the stride that faults every page in.
	pageWords = 512
	// minBuffer and maxBuffer bound the buffer whatever the cache (maxBuffer: the fill, which
	// faults every page in, stays near a second).
	minBuffer = 256 << 20
	maxBuffer = 2 << 30
	// assumedLLC is the last-level cache assumed where the system does not say.
	assumedLLC = 32 << 20
)

// Result is a measured DRAM read bandwidth.
type Result struct {
	// GBps is the best pass's rate, in 10⁹ bytes per second.
	GBps float64
	// Bytes is the size of the buffer streamed.
	Bytes int64
	// LLCBytes is the last-level cache the buffer was sized from; 0 when the system did not
	// say (assumedLLC was taken).
	LLCBytes int64
	// Threads is the number of threads that streamed it.
	Threads int
	// Passes is the number of passes the budget held.
	Passes int
}

// String describes the bandwidth and how it was measured.
func (r Result) String() string {
	llc := fmt.Sprintf("%d× the %s last-level cache", r.Bytes/max(r.LLCBytes, 1), mib(r.LLCBytes))
	if r.LLCBytes == 0 {
		llc = "the last-level cache's size unknown"
	}
	return fmt.Sprintf("%.1f GB/s (%d threads reading %s, %s; best of %d passes)", r.GBps, r.Threads, mib(r.Bytes), llc, r.Passes)
}

// mib writes a size in MiB.
func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// LastLevelCache is the total size of the machine's last-level caches (the highest level of
// data or unified cache, each instance counted once), as Linux's sysfs reports them; 0 where
// it does not.
func LastLevelCache() int64 { return lastLevelCache("/sys/devices/system/cpu") }

// lastLevelCache reads the caches under a sysfs cpu directory: cpuN/cache/indexM/{level,
// type, size, shared_cpu_list}.
func lastLevelCache(root string) int64 {
	dirs, _ := filepath.Glob(filepath.Join(root, "cpu[0-9]*", "cache", "index[0-9]*"))
	sort.Strings(dirs)
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	level, sizes := 0, map[string]int64{} // the highest level's instances, by their CPUs
	for _, dir := range dirs {
		if t := read(dir, "type"); t != "Data" && t != "Unified" {
			continue
		}
		l, err := strconv.Atoi(read(dir, "level"))
		size := parseSize(read(dir, "size"))
		if err != nil || size <= 0 || l < level {
			continue
		}
		if l > level {
			level, sizes = l, map[string]int64{}
		}
		shared := read(dir, "shared_cpu_list")
		if shared == "" {
			shared = dir // an instance of its own
		}
		sizes[shared] = size
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	return total
}

// parseSize parses sysfs's cache sizes: "32768K", "1M", a plain number of bytes; 0 where it
// cannot.
func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	n, err := strconv.ParseInt(strings.TrimRight(s, "KMG"), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}

// BufferBytes is the buffer Measure streams for a last-level cache of llc bytes (0: unknown,
// assumedLLC taken) on a machine of total bytes of memory (0: unknown): eight times the cache,
// at least minBuffer, at most maxBuffer and an eighth of the memory, a whole number of MiB.
func BufferBytes(llc, total int64) int64 {
	if llc <= 0 {
		llc = assumedLLC
	}
	n := min(max(8*llc, minBuffer), maxBuffer)
	if total > 0 {
		n = max(min(n, total/8), 1<<20)
	}
	return n &^ (1<<20 - 1)
}

// streamLines reads one word of every cache line of b (len(b) a multiple of 4 lines) into
// four independent sums.
//
//go:noinline
func streamLines(b []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+4*lineWords <= len(b); i += 4 * lineWords {
		l := b[i : i+4*lineWords : i+4*lineWords]
		s0 += l[0]
		s1 += l[lineWords]
		s2 += l[2*lineWords]
		s3 += l[3*lineWords]
	}
	return s0 + s1 + s2 + s3
}

// sink keeps the sums alive.
var sink uint64

// Measure measures the DRAM read bandwidth of threads threads: the best of the passes over
// a BufferBytes buffer that fit in budget (at least three), after writing every page of it.
func Measure(threads int, budget time.Duration, totalMemory int64) (Result, error) {
	if threads < 1 {
		return Result{}, fmt.Errorf("membw: %d threads", threads)
	}
	r := Result{LLCBytes: LastLevelCache(), Threads: threads}
	r.Bytes = BufferBytes(r.LLCBytes, totalMemory)
	buf, free, err := allocate(int(r.Bytes))
	if err != nil {
		return Result{}, fmt.Errorf("membw: a buffer of %s: %w", mib(r.Bytes), err)
	}
	defer free()
	r.GBps, r.Passes = stream(buf, threads, budget, true)
	return r, nil
}

// stream streams buf with threads threads until budget has passed (at least three passes),
// after faulting every page in when touch is set; it returns the best pass's GB/s and the
// passes made.
func stream(buf []uint64, threads int, budget time.Duration, touch bool) (float64, int) {
	if prev := runtime.GOMAXPROCS(0); prev < threads { // the commands decode on one P
		runtime.GOMAXPROCS(threads)
		defer runtime.GOMAXPROCS(prev)
	}
	share := len(buf) / threads / (4 * lineWords) * (4 * lineWords)
	start, done := make([]chan bool, threads), make(chan uint64, threads)
	var wg sync.WaitGroup
	for t := range threads {
		part := buf[t*share : (t+1)*share]
		start[t] = make(chan bool)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if touch {
				for i := 0; i < len(part); i += pageWords {
					part[i] = uint64(i)
				}
			}
			done <- 0
			for range start[t] {
				done <- streamLines(part)
			}
		}()
	}
	for range threads {
		<-done // every page written
	}
	best, passes := 0.0, 0
	for t0 := time.Now(); passes < 3 || time.Since(t0) < budget; passes++ {
		p0 := time.Now()
		for _, c := range start {
			c <- true
		}
		for range threads {
			sink += <-done
		}
		if s := time.Since(p0).Seconds(); s > 0 {
			best = max(best, float64(8*share*threads)/s/1e9)
		}
	}
	for _, c := range start {
		close(c)
	}
	wg.Wait()
	return best, passes
}
