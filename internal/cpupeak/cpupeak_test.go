package cpupeak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func cpuinfo(vendor, family, flags string) string {
	return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: " + family + "\nmodel name\t: Test CPU\nflags\t\t: " + flags +
		"\n\nprocessor\t: 1\nflags\t\t: fpu\n"
}

func TestUnits(t *testing.T) {
	for _, c := range []struct {
		name, info      string
		lanes, fmaUnits int
	}{
		{"Zen 5", cpuinfo("AuthenticAMD", "26", "sse fma avx2 avx512f"), 16, 2},
		{"Zen 4", cpuinfo("AuthenticAMD", "25", "sse fma avx2 avx512f"), 8, 2},
		{"Xeon AVX-512", cpuinfo("GenuineIntel", "6", "sse fma avx2 avx512f"), 16, 2},
		{"AVX2", cpuinfo("GenuineIntel", "6", "sse fma avx2"), 8, 2},
		{"SSE only", cpuinfo("GenuineIntel", "6", "sse sse2"), 4, 1},
		{"no cpuinfo", "", 4, 1},
	} {
		p := Units("amd64", c.info)
		assert.Equal(t, c.lanes, p.Lanes, c.name)
		assert.Equal(t, c.fmaUnits, p.FMAUnits, c.name)
		assert.NotEmpty(t, p.Basis, c.name)
	}
	assert.Equal(t, 4, Units("arm64", "").Lanes)
}

func TestPeakArithmetic(t *testing.T) {
	p := Peak{ClockGHz: 3.5, Lanes: 16, FMAUnits: 2}
	assert.Equal(t, 64, p.FlopsPerCycle())
	assert.InDelta(t, 2*3.5*64, p.GFLOPS(2), 1e-9)
	assert.Contains(t, p.String(2), "448.0 GFLOP/s")
}

// TestMeasureClock: the dependent chain reads a plausible clock, and the same one twice (the
// best of many trials is stable even on a busy machine).
func TestMeasureClock(t *testing.T) {
	a, b := MeasureClock(50*time.Millisecond), MeasureClock(50*time.Millisecond)
	assert.Greater(t, a, 0.3)
	assert.Less(t, a, 10.0)
	assert.InEpsilon(t, a, b, 0.25)
}
