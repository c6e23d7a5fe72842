package bench

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/blasgemm"
	"github.com/toyml/toy/internal/cpupeak"
)

// defaultBenchShapes are the m×n×k shapes of docs/PERFORMANCE.md: a small GEMM, llama.cpp's
// square 4096³, a 7B-class FFN down-projection over 512 tokens, a SmolLM2-class projection.
const defaultBenchShapes = "1024x1024x256,4096x4096x4096,4096x512x14336,576x1536x256"

// runBenchMatMul is `toy bench matmul`: matrix-multiply throughput per weight type and shape,
// as a llama-bench-like table, and the overhead of building a graph in Go.
func runBenchMatMul(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench matmul", flag.ContinueOnError)
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	typesFlag := fs.String("types", "f32,f16,q8_0", "comma-separated weight types (f32, f16, bf16, q8_0, q4_0, q4_K, …)")
	shapesFlag := fs.String("shapes", defaultBenchShapes, "comma-separated shapes m×n×k (or mxnxk): weight [k, m] times activations [k, n]")
	minTime := fs.Duration("time", time.Second, "minimum time per measurement (after one warm-up; at least 2 repetitions)")
	allow := cli.RegisterGate(fs)
	nodes := fs.Int("nodes", 1000, "nodes of the graph whose build time is measured (0: skip)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, `usage: toy bench matmul [flags]

Measures ggml's matrix multiply on this machine: for each weight type and shape m×n×k it
computes MulMat(A, B), A a random weight [k, m] of that type and B random f32 activations
[k, n], and reports GFLOP/s = 2·m·n·k / seconds per repetition (mean ± standard deviation,
and that of the fastest repetition, the figure least disturbed by other work on the machine).
The best mean f32 figure is "the matmul ceiling"; each row also shows its percentage of it
and of the cores' f32 FMA peak (threads × measured clock × vector lanes × FMA units × 2; see
docs/PERFORMANCE.md for how the clock is measured). Where OpenBLAS is installed, its sgemm is
timed on each f32 shape too, as the best GEMM of the machine to compare ggml's with.
Then it times building (not computing) a graph of -nodes nodes in Go: the binding overhead.

The table goes to standard output, progress to standard error. The 4096×4096×4096 f32 shape
takes a few seconds per repetition on 2 cores. See docs/PERFORMANCE.md.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if *threads <= 0 {
		return cli.Usagef("-t %d: want at least 1 thread", *threads)
	}
	if err := cli.UsableThreads(stderr, "bench matmul", threads); err != nil {
		return err
	}
	if *minTime < 0 {
		return cli.Usagef("-time %v is negative", *minTime)
	}
	if *nodes < 0 {
		return cli.Usagef("-nodes %d is negative", *nodes)
	}
	types, err := parseBenchTypes(*typesFlag)
	if err != nil {
		return cli.AsUsage(err)
	}
	shapes, err := parseBenchShapes(*shapesFlag)
	if err != nil {
		return cli.AsUsage(err)
	}
	if err := cli.GateNoLookups(stderr, "bench matmul", *allow); err != nil {
		return err
	}
	for _, typ := range types {
		for _, s := range shapes {
			if s[2]%ggml.BlockSize(typ) != 0 {
				return cli.Usagef("shape %d×%d×%d: k is not a multiple of the %s block size %d", s[0], s[1], s[2], ggml.TypeName(typ), ggml.BlockSize(typ))
			}
		}
	}

	be, err := ggml.NewBackend(*threads)
	if err != nil {
		return err
	}
	defer be.Close()

	bi := ggml.Build()
	simd := strings.Join(bi.CPUFeatures, " ")
	if simd == "" {
		simd = "none — scalar kernels; build with make, which passes -march"
	}
	fmt.Fprintf(stdout, "toy bench: %s backend, %d threads, %s\nggml SIMD: %s\n\n", be.Name(), be.Threads(), bi.GGMLModule, simd)

	var results []ggml.MatMulResult
	for _, typ := range types {
		for _, s := range shapes {
			fmt.Fprintf(stderr, "measuring %s %d×%d×%d …", ggml.TypeName(typ), s[0], s[1], s[2])
			r, err := ggml.MeasureMatMul(be, typ, s[0], s[1], s[2], *minTime)
			if err != nil {
				fmt.Fprintln(stderr)
				return err
			}
			fmt.Fprintf(stderr, " %.1f GFLOP/s (%d reps)\n", r.GFLOPS(), r.Reps)
			results = append(results, r)
		}
	}
	peak := cpuPeak(be)
	writeBenchTable(stdout, results, peak)
	if be.Name() == "CPU" {
		writeBLASComparison(stdout, stderr, results, peak, *minTime)
	}

	if *nodes > 0 {
		d, err := ggml.MeasureGraphBuild(*nodes)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\ngraph build (Go, no compute): %d nodes in %.1f µs, %.0f ns per node\n",
			*nodes, float64(d.Nanoseconds())/1e3, float64(d.Nanoseconds())/float64(*nodes))
	}
	return nil
}

// writeBenchTable prints the results as a markdown table, llama-bench style, with each row's
// share of the matmul ceiling (the best f32 figure) and of the cores' FMA peak (when peak is
// known).
func writeBenchTable(w io.Writer, results []ggml.MatMulResult, peak cpupeak.Peak) {
	var ceiling ggml.MatMulResult
	for _, r := range results {
		if r.Weight == ggml.F32 && r.GFLOPS() > ceiling.GFLOPS() {
			ceiling = r
		}
	}
	header := []string{"backend", "threads", "type", "shape", "reps", "ms/rep", "GFLOP/s", "best rep", "% ceiling", "% FMA peak"}
	right := []bool{false, true, false, false, true, true, true, true, true, true}
	rows := [][]string{header}
	for _, r := range results {
		pct, pctPeak := "–", "–"
		if ceiling.GFLOPS() > 0 {
			pct = fmt.Sprintf("%.1f %%", 100*r.GFLOPS()/ceiling.GFLOPS())
		}
		if p := peak.GFLOPS(r.Threads); p > 0 {
			pctPeak = fmt.Sprintf("%.1f %%", 100*r.GFLOPS()/p)
		}
		rows = append(rows, []string{r.Backend, strconv.Itoa(r.Threads), ggml.TypeName(r.Weight), r.Shape(),
			strconv.Itoa(r.Reps), fmt.Sprintf("%.2f", r.Seconds*1e3),
			fmt.Sprintf("%.2f ± %.2f", r.GFLOPS(), r.GFLOPSStdDev()), fmt.Sprintf("%.2f", r.BestGFLOPS()), pct, pctPeak})
	}
	width := make([]int, len(header))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	rule := make([]string, len(header))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
		if right[i] {
			rule[i] = rule[i][1:] + ":"
		}
	}
	line(rule)
	for _, row := range rows[1:] {
		line(row)
	}
	if p := peak.GFLOPS(ceiling.Threads); p > 0 && ceiling.GFLOPS() > 0 {
		fmt.Fprintf(w, "\nFMA peak (f32): %s\nmatmul ceiling (best f32): %.2f GFLOP/s at %s, %.1f %% of the FMA peak\n",
			peak.String(ceiling.Threads), ceiling.GFLOPS(), ceiling.Shape(), 100*ceiling.GFLOPS()/p)
	} else if ceiling.GFLOPS() > 0 {
		fmt.Fprintf(w, "\nmatmul ceiling (best f32): %.2f GFLOP/s at %s\n", ceiling.GFLOPS(), ceiling.Shape())
	} else {
		fmt.Fprintln(w, "\nno f32 shape was measured, so there is no matmul ceiling to compare with (-types f32,…)")
	}
}

// writeBLASComparison times OpenBLAS's sgemm (the best GEMM commonly installed) on each f32
// shape measured, with the same threads, and prints it next to ggml's f32 figure and as a share
// of the FMA peak. Without OpenBLAS it says so and how to get it.
func writeBLASComparison(w, stderr io.Writer, results []ggml.MatMulResult, peak cpupeak.Peak, minTime time.Duration) {
	if err := blasgemm.Load(); err != nil {
		fmt.Fprintf(w, "\nOpenBLAS sgemm: not measured (%v; Debian: apt install libopenblas0)\n", err)
		return
	}
	fmt.Fprintln(w, "\nOpenBLAS sgemm (cblas_sgemm, same shapes and threads; the best f32 GEMM installed):")
	for _, r := range results {
		if r.Weight != ggml.F32 {
			continue
		}
		fmt.Fprintf(stderr, "measuring OpenBLAS %s …\n", r.Shape())
		b, err := blasgemm.Measure(r.Threads, r.M, r.N, r.K, minTime)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", r.Shape(), err)
			continue
		}
		line := fmt.Sprintf("  %s: %.2f GFLOP/s (best rep %.2f); ggml f32 %.2f = %.2f× OpenBLAS", r.Shape(), b.GFLOPS, b.Best, r.GFLOPS(), r.GFLOPS()/b.GFLOPS)
		if p := peak.GFLOPS(r.Threads); p > 0 {
			line += fmt.Sprintf("; OpenBLAS %.1f %% of the FMA peak", 100*b.GFLOPS/p)
		}
		fmt.Fprintln(w, line)
	}
}

// parseBenchShapes reads "m×n×k,…"; x, X and * also separate the dimensions.
func parseBenchShapes(s string) ([][3]int, error) {
	var shapes [][3]int
	for _, spec := range strings.Split(s, ",") {
		spec = strings.TrimSpace(spec)
		parts := strings.FieldsFunc(spec, func(r rune) bool { return r == '×' || r == 'x' || r == 'X' || r == '*' })
		var shape [3]int
		ok := len(parts) == 3
		for i := 0; ok && i < 3; i++ {
			v, err := strconv.Atoi(parts[i])
			ok = err == nil && v > 0
			shape[i] = v
		}
		if !ok {
			return nil, fmt.Errorf("-shapes: %q is not m×n×k with positive integers (e.g. 4096x512x14336)", spec)
		}
		shapes = append(shapes, shape)
	}
	return shapes, nil
}
