package bench

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
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
DRAM read bandwidth measured with the same threads before the model is loaded and again after
it is closed (each a buffer 8× the last-level cache streamed for 200 ms, best pass; the share
is of their mean; -no-dram skips them). Where the two measures differ by more than 15 % the
line says so: the host's memory changed speed during the tests (shared virtual machines do),
and the share is not to be trusted. A model that fits in the last-level cache is said so: its
share is of DRAM and can exceed 100 %.
`

// dramShift is how far apart (relative to the larger) the measures before and after the tests
// may be before toy bench model warns that the host's memory changed speed between them.
const dramShift = 0.15

// dramMeasures is the DRAM read bandwidth measured before and after a bench's tests.
type dramMeasures struct {
	before, after membw.Result
	ok            bool
}

// mean is the mean of the two measures' GB/s.
func (d dramMeasures) mean() float64 { return (d.before.GBps + d.after.GBps) / 2 }

// shifted reports whether the two measures differ by more than dramShift of the larger.
func (d dramMeasures) shifted() bool {
	hi, lo := max(d.before.GBps, d.after.GBps), min(d.before.GBps, d.after.GBps)
	return hi > 0 && (hi-lo)/hi > dramShift
}

// measureDRAM measures the DRAM read bandwidth of threads threads for toy bench model and toy
// bench dram, when the backend is the CPU and measure is set; ok is false otherwise, or where
// the buffer could not be had (said on stderr). when says which measure it is on stderr.
func measureDRAM(stderr io.Writer, threads int, measure bool, when string) (r membw.Result, ok bool) {
	if !measure || ggml.BackendKind != "cpu" {
		return membw.Result{}, false
	}
	fmt.Fprintf(stderr, "toy bench: measuring the DRAM read bandwidth with %d threads%s …\n", threads, when)
	r, err := membw.Measure(threads, dramBudget, sysmem.Total())
	if err != nil {
		fmt.Fprintf(stderr, "toy bench: the DRAM read bandwidth is not measured: %v\n", err)
		return r, false
	}
	return r, true
}

// reportGenBandwidth measures the DRAM read bandwidth after the tests, where measure says the one
// before them (before) was taken, and prints the line of writeGenBandwidth, for a bench with a
// generation test.
func reportGenBandwidth(stdout, stderr io.Writer, r decoding.BenchResult, before membw.Result, measure bool) {
	if r.GenTokens == 0 {
		return
	}
	d := dramMeasures{before: before}
	if measure {
		d.after, d.ok = measureDRAM(stderr, r.Threads, true, " after the tests")
	}
	writeGenBandwidth(stdout, r, d, membw.LastLevelCache())
}

// writeGenBandwidth prints the generation test's bandwidth: the bytes a token streams
// (weights and cache) × tokens/s, and its share of the mean DRAM read bandwidth (when
// measured), with a note where the measures before and after the tests disagree and where
// those bytes fit in the last-level cache of llc bytes (0: unknown).
func writeGenBandwidth(w io.Writer, r decoding.BenchResult, dram dramMeasures, llc int64) {
	if r.GenTokens == 0 || r.TG.Mean <= 0 {
		return
	}
	perToken := float64(r.MatrixBytes) + r.KVBytes
	line := fmt.Sprintf("tg%d streams %.2f MB a token (weights %.2f + KV cache %.2f) × %.2f t/s = %.1f GB/s",
		r.GenTokens, perToken/1e6, float64(r.MatrixBytes)/1e6, r.KVBytes/1e6, r.TG.Mean, r.GenGBps())
	switch {
	case dram.ok && dram.mean() > 0:
		line += fmt.Sprintf(", %.1f %% of the DRAM read bandwidth, %.1f GB/s (the mean of %s before the tests and %.1f GB/s after)",
			100*r.GenGBps()/dram.mean(), dram.mean(), dram.before, dram.after.GBps)
		if dram.shifted() {
			line += fmt.Sprintf("; the measures differ by more than %.0f %%: the host's memory changed speed during the tests, so the share is not to be trusted", 100*dramShift)
		}
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

// runBenchDRAM is `toy bench dram`: the DRAM read bandwidth that toy bench model's generation
// share is of, on its own, to bracket another program's run (llama-bench's, say) with the
// same measure.
func runBenchDRAM(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench dram", flag.ContinueOnError)
	threads := fs.Int("t", 2, "the number of threads that read (0: one per core; more than the cores this process may use are lowered to them)")
	count := fs.Int("n", 1, "measures, one a line")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: toy bench dram [-t 2] [-n 1]

The DRAM read bandwidth toy bench model's generation share is of: threads read a buffer 8×
the last-level cache (at least 256 MiB, in huge pages where the system gives them), one load
per cache line, for 200 ms; the best pass, in GB/s (10⁹ bytes a second). On a shared virtual
machine it can change from one second to the next: measure before and after what you compare
with it.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *count < 1 {
		return cli.Usagef("-n %d: want at least 1 measure", *count)
	}
	if ggml.BackendKind != "cpu" {
		return fmt.Errorf("toy bench dram measures the CPU's memory: this toy is built for the %s backend", ggml.BackendKind)
	}
	if err := cli.UsableThreads(stderr, "bench dram", threads); err != nil {
		return err
	}
	for i := 0; i < *count; i++ {
		r, err := membw.Measure(*threads, dramBudget, sysmem.Total())
		if err != nil {
			return fmt.Errorf("toy bench dram: %w", err)
		}
		fmt.Fprintf(stdout, "DRAM read bandwidth %s\n", r)
	}
	return nil
}
