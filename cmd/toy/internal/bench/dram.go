package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/membw"
	"github.com/toyml/toy/internal/sysmem"
)

// dramBudget is the time the DRAM read bandwidth's passes take (after filling the buffer).
const dramBudget = 200 * time.Millisecond

// benchModelBandwidthHelp is toy bench model's help on the generation bandwidth line.
const benchModelBandwidthHelp = `After the tests, a generation line: the bytes one token streams, the weight matrices the
decoder multiplies for each token (every block's projections, a mixture's used experts, the
output head or the tied embeddings: the sum of their ggml byte sizes) plus the mean key/value
cache a token reads at the test's depth (positions 0..p for the token at p, each layer's keys
and values in the cache type), times the generation tokens/s, as GB/s and as a share of the
DRAM read bandwidth measured with the same threads (a buffer 8× the last-level cache streamed
for 200 ms, best pass; -no-dram skips it). A model that fits in the last-level cache is said
so: its share is of DRAM and can exceed 100 %.
`

// measureDRAM measures the DRAM read bandwidth of threads threads for toy bench model, when the
// backend is the CPU and measure is set; ok is false otherwise, or where the buffer could not
// be had (said on stderr).
func measureDRAM(stderr io.Writer, threads int, measure bool) (r membw.Result, ok bool) {
	if !measure || ggml.BackendKind != "cpu" {
		return membw.Result{}, false
	}
	fmt.Fprintf(stderr, "toy bench: measuring the DRAM read bandwidth with %d threads …\n", threads)
	r, err := membw.Measure(threads, dramBudget, sysmem.Total())
	if err != nil {
		fmt.Fprintf(stderr, "toy bench: the DRAM read bandwidth is not measured: %v\n", err)
		return r, false
	}
	return r, true
}

// reportGenBandwidth measures the DRAM read bandwidth with r's threads (unless measure is
// false) and prints the line of writeGenBandwidth, for a bench with a generation test.
func reportGenBandwidth(stdout, stderr io.Writer, r decoding.BenchResult, measure bool) {
	if r.GenTokens == 0 {
		return
	}
	dram, measured := measureDRAM(stderr, r.Threads, measure)
	writeGenBandwidth(stdout, r, dram, measured, membw.LastLevelCache())
}

// writeGenBandwidth prints the generation test's bandwidth: the bytes a token streams
// (weights and cache) × tokens/s, and its share of dram (when measured), with a note where
// those bytes fit in the last-level cache of llc bytes (0: unknown).
func writeGenBandwidth(w io.Writer, r decoding.BenchResult, dram membw.Result, measured bool, llc int64) {
	if r.GenTokens == 0 || r.TG.Mean <= 0 {
		return
	}
	perToken := float64(r.MatrixBytes) + r.KVBytes
	line := fmt.Sprintf("tg%d streams %.2f MB a token (weights %.2f + KV cache %.2f) × %.2f t/s = %.1f GB/s",
		r.GenTokens, perToken/1e6, float64(r.MatrixBytes)/1e6, r.KVBytes/1e6, r.TG.Mean, r.GenGBps())
	switch {
	case measured && dram.GBps > 0:
		line += fmt.Sprintf(", %.1f %% of the DRAM read bandwidth, %s", 100*r.GenGBps()/dram.GBps, dram)
	case ggml.BackendKind != "cpu":
		line += " (on the " + ggml.BackendKind + " backend: no DRAM share)"
	default:
		line += " (the DRAM read bandwidth is not measured)"
	}
	if llc > 0 && perToken <= float64(llc) {
		line += fmt.Sprintf("; the model fits in the %d MiB last-level cache: its share is of DRAM and can exceed 100 %%", llc>>20)
	}
	fmt.Fprintln(w, line)
}
