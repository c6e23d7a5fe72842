package membw

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/sysmem"
)

// writeCache writes one cache's sysfs entry under root.
func writeCache(t *testing.T, root string, cpu, index, level int, typ, size, shared string) {
	dir := filepath.Join(root, "cpu"+itoa(cpu), "cache", "index"+itoa(index))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, v := range map[string]string{"level": itoa(level), "type": typ, "size": size, "shared_cpu_list": shared} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestLastLevelCache: the highest level's data or unified caches, each instance (its CPUs)
// counted once; instruction caches and lower levels ignored.
func TestLastLevelCache(t *testing.T) {
	root := t.TempDir()
	for cpu := range 4 {
		writeCache(t, root, cpu, 0, 1, "Data", "48K", itoa(cpu))
		writeCache(t, root, cpu, 1, 1, "Instruction", "32K", itoa(cpu))
		writeCache(t, root, cpu, 2, 2, "Unified", "1024K", itoa(cpu))
		writeCache(t, root, cpu, 3, 3, "Unified", "32768K", []string{"0-1", "2-3"}[cpu/2])
	}
	assert.Equal(t, int64(64<<20), lastLevelCache(root))
	assert.Zero(t, lastLevelCache(t.TempDir()))
	assert.Equal(t, int64(1<<20), parseSize("1M"))
	assert.Equal(t, int64(512), parseSize("512"))
	assert.Zero(t, parseSize("big"))
}

func TestBufferBytes(t *testing.T) {
	assert.Equal(t, int64(512<<20), BufferBytes(64<<20, 0))
	assert.Equal(t, int64(8*assumedLLC), BufferBytes(0, 0))
	assert.Equal(t, int64(minBuffer), BufferBytes(1<<20, 0))
	assert.Equal(t, int64(maxBuffer), BufferBytes(1<<30, 64<<30))
	assert.Equal(t, int64(1300<<20), BufferBytes(162.5*(1<<20), 64<<30)) // whole MiB
	assert.Equal(t, int64(128<<20), BufferBytes(260<<20, 1<<30))         // an eighth of the memory
}

// bestCopy is the best rate, in GB/s of bytes copied, of a naive Go copy of src into dst.
func bestCopy(dst, src []uint64, d time.Duration) float64 {
	copy(dst, src) // faults dst's pages in
	best := 0.0
	for t0 := time.Now(); time.Since(t0) < d || best == 0; {
		p0 := time.Now()
		copy(dst, src)
		best = max(best, float64(8*len(src))/time.Since(p0).Seconds()/1e9)
	}
	return best
}

// TestMeasure: one thread's DRAM read bandwidth is positive and within sane bounds of a naive
// Go copy of a buffer of the same size (which reads as much and writes it too: a read stream
// is at least half as fast, and not four times faster, as a buffer in the cache or the zero
// page would be), and well below the rate of the same loop over a buffer that the L2 holds.
func TestMeasure(t *testing.T) {
	r, err := Measure(1, 100*time.Millisecond, sysmem.Total())
	require.NoError(t, err)
	t.Log(r)
	require.Greater(t, r.GBps, 0.0)
	assert.GreaterOrEqual(t, r.Passes, 3)
	assert.GreaterOrEqual(t, r.Bytes, int64(minBuffer))
	assert.Contains(t, r.String(), "1 threads reading")

	src, freeSrc, err := allocate(int(r.Bytes))
	require.NoError(t, err)
	defer freeSrc()
	dst, freeDst, err := allocate(int(r.Bytes))
	require.NoError(t, err)
	defer freeDst()
	for i := range src {
		src[i] = uint64(i)
	}
	cp := bestCopy(dst, src, 100*time.Millisecond)
	t.Logf("naive copy of %d MiB: %.1f GB/s", r.Bytes>>20, cp)
	assert.Greater(t, r.GBps, 0.5*cp)
	assert.Less(t, r.GBps, 4*cp)

	small := src[:(256<<10)/8] // 256 KiB: in the L2 of any core
	inCache := 0.0
	for t0 := time.Now(); time.Since(t0) < 50*time.Millisecond; {
		p0 := time.Now()
		for range 64 {
			sink += streamLines(small)
		}
		inCache = max(inCache, float64(64*8*len(small))/time.Since(p0).Seconds()/1e9)
	}
	t.Logf("the same loop over 256 KiB: %.1f GB/s", inCache)
	assert.Less(t, r.GBps, 0.8*inCache)

	_, err = Measure(0, time.Millisecond, 0)
	assert.Error(t, err)
}

// TestMeasureThreads: two threads stream the buffer in two shares (one Measure on a
// one-P runtime, as the commands decode, still runs both).
func TestMeasureThreads(t *testing.T) {
	r, err := Measure(2, 50*time.Millisecond, sysmem.Total())
	require.NoError(t, err)
	t.Log(r)
	assert.Greater(t, r.GBps, 0.0)
	assert.Equal(t, 2, r.Threads)
}
