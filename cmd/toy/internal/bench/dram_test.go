package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/membw"
)

// genBandwidthLine is toy bench model's generation bandwidth line, its numbers captured.
var genBandwidthLine = regexp.MustCompile(`(?m)^tg(\d+) streams (\d+\.\d\d) MB a token \(weights (\d+\.\d\d) \+ KV cache (\d+\.\d\d)\) × (\d+\.\d\d) t/s = (\d+\.\d) GB/s(.*)$`)

// TestBenchModelBandwidth: on a tiny random model, toy bench model prints the bytes a
// generated token streams (the model's matrices and the cache at that depth), times the tg
// test's tokens/s as GB/s, and its share of the DRAM read bandwidth it measured with the
// bench's threads, noting that the model fits in the last-level cache; -no-dram skips the
// measurement and says so.
func TestBenchModelBandwidth(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, transformer.WriteRandomGGUF(path, a, ggml.F16, 1))
	m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	weights, kv := m.MatrixBytesPerToken(), m.KVBytesRead(decoding.KVF16, 3, 4)
	require.NoError(t, m.Close())

	out, errOut, code := runToy("bench", "model", "-m", path, "-p", "0", "-n", "4", "-d", "3", "-r", "1", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "measuring the DRAM read bandwidth with 1 threads before the tests")
	assert.Contains(t, errOut, "measuring the DRAM read bandwidth with 1 threads after the tests")
	tg := regexp.MustCompile(`tg4 @ d3 (\d+\.\d\d) ± `).FindStringSubmatch(out)
	require.NotNil(t, tg, out)
	mm := genBandwidthLine.FindStringSubmatch(out)
	require.NotNil(t, mm, out)
	num := func(s string) float64 { v, err := strconv.ParseFloat(s, 64); require.NoError(t, err); return v }
	assert.Equal(t, "4", mm[1])
	assert.Equal(t, fmt.Sprintf("%.2f", (float64(weights)+kv)/1e6), mm[2])
	assert.Equal(t, fmt.Sprintf("%.2f", float64(weights)/1e6), mm[3])
	assert.Equal(t, fmt.Sprintf("%.2f", kv/1e6), mm[4])
	assert.Equal(t, tg[1], mm[5]) // the tg test's mean
	gbps := num(mm[6])
	assert.InDelta(t, num(mm[2])*num(mm[5])/1e3, gbps, 0.05+0.01*gbps)

	share := regexp.MustCompile(`^, (\d+\.\d) % of the DRAM read bandwidth, (\d+\.\d) GB/s \(the mean of (\d+\.\d) GB/s \(1 threads reading (\d+) MiB, [^)]*\) before the tests and (\d+\.\d) GB/s after\)`).FindStringSubmatch(mm[7])
	require.NotNil(t, share, mm[7])
	assert.InDelta(t, 100*gbps/num(share[2]), num(share[1]), 0.05+0.01*num(share[1]))
	assert.InDelta(t, (num(share[3])+num(share[5]))/2, num(share[2]), 0.06)
	assert.Positive(t, num(share[3]))
	assert.Positive(t, num(share[5]))
	if llc := membw.LastLevelCache(); llc > 0 {
		assert.Contains(t, mm[7], fmt.Sprintf("; the model fits in the %d MiB last-level cache: its share is of DRAM and can exceed 100 %%", llc>>20))
	}

	out, errOut, code = runToy("bench", "model", "-m", path, "-p", "0", "-n", "2", "-r", "1", "-t", "1", "-no-dram")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "measuring the DRAM")
	mm = genBandwidthLine.FindStringSubmatch(out)
	require.NotNil(t, mm, out)
	assert.Contains(t, mm[7], " (the DRAM read bandwidth is not measured)")

	out, errOut, code = runToy("bench", "model", "-m", path, "-p", "4", "-n", "0", "-r", "1", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "streams", "no generation test, no bandwidth line")
	assert.NotContains(t, errOut, "measuring the DRAM")
}

// TestGenBandwidthShift: the generation line's share is of the mean of the measures before and
// after the tests, and it warns exactly when they differ by more than dramShift of the larger,
// on random pairs of measures.
func TestGenBandwidthShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := decoding.BenchResult{GenTokens: 32, MatrixBytes: 800e6, KVBytes: 0.5e6}
	r.TG.Mean = 50
	for i := 0; i < 200; i++ {
		before, after := 20+80*rng.Float64(), 20+80*rng.Float64()
		d := dramMeasures{before: membw.Result{GBps: before, Bytes: 256 << 20, LLCBytes: 32 << 20, Threads: 2, Passes: 9}, after: membw.Result{GBps: after}, ok: true}
		var b strings.Builder
		writeGenBandwidth(&b, r, d, 0)
		mm := genBandwidthLine.FindStringSubmatch(b.String())
		require.NotNil(t, mm, b.String())
		share := regexp.MustCompile(`^, (\d+\.\d) % of the DRAM read bandwidth, (\d+\.\d) GB/s`).FindStringSubmatch(mm[7])
		require.NotNil(t, share, mm[7])
		mean := (before + after) / 2
		assert.Equal(t, fmt.Sprintf("%.1f", mean), share[2])
		assert.Equal(t, fmt.Sprintf("%.1f", 100*r.GenGBps()/mean), share[1])
		warned := strings.Contains(mm[7], "the host's memory changed speed during the tests")
		assert.Equal(t, math.Abs(before-after) > 0.15*math.Max(before, after), warned, "before %.2f after %.2f: %s", before, after, mm[7])
	}
}

// TestBenchDRAM: toy bench dram prints one positive measure a line, -n of them, and refuses
// -n 0 as a usage error.
func TestBenchDRAM(t *testing.T) {
	out, errOut, code := runToy("bench", "dram", "-t", "1", "-n", "2")
	require.Equal(t, 0, code, errOut)
	lines := regexp.MustCompile(`(?m)^DRAM read bandwidth (\d+\.\d) GB/s \(1 threads reading \d+ MiB, .*best of \d+ passes\)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, lines, 2, out)
	for _, l := range lines {
		v, err := strconv.ParseFloat(l[1], 64)
		require.NoError(t, err)
		assert.Positive(t, v)
	}
	_, errOut, code = runToy("bench", "dram", "-n", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-n 0: want at least 1 measure")
}
