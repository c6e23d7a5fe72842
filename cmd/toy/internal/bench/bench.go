package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/blasgemm"
	"github.com/toyml/toy/internal/cpupeak"
)

// defaultBenchShapes are the m×n×k shapes of docs/PERFORMANCE.md: a small GEMM, llama.cpp's
// square 4096³, a 7B-class FFN down-projection over 512 tokens, a SmolLM2-class projection.
const defaultBenchShapes = "1024x1024x256,4096x4096x4096,4096x512x14336,576x1536x256"

// benchTypes are the weight types -types accepts (those ggml.MeasureMatMul can fill).
var benchTypes = []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.Q8_0, ggml.Q4_0, ggml.Q4_1,
	ggml.Q5_0, ggml.Q5_1, ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K}

// benchCommands are the words of `toy bench`.
var benchCommands = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}{
	{"matmul", "matrix-multiply GFLOP/s per weight type and shape, and the graph-building overhead", runBenchMatMul},
	{"model", "a model's prompt-processing and generation tokens/s (-m MODEL or -random PRESET), as llama-bench", runBenchModel},
	{"train", "training tokens/s and memory of a model shape on random tokens", runBenchTrain},
	{"finetune", "fine-tuning tokens/s and peak memory: LoRA on a frozen base of each type vs a full fine-tune", runBenchFinetune},
	{"serve", "toy serve's aggregate generation tokens/s with 1 and N streaming clients over HTTP, and time to first token", runBenchServe},
}

// benchNames are the words of `toy bench`.
func benchNames() []string {
	var names []string
	for _, c := range benchCommands {
		names = append(names, c.name)
	}
	return names
}

func benchUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: toy bench <%s> [flags]\n\nBenchmarks:\n\n", strings.Join(benchNames(), "|"))
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'toy bench <benchmark> -h' for its flags. See docs/PERFORMANCE.md.\n")
}

// Run dispatches `toy bench matmul`, `model`, `train`, `finetune` and `serve`. Without a
// word (or with -h) it lists them, as plain `toy` lists the commands; an unknown word is a
// usage error.
func Run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		benchUsage(stdout)
		return nil
	}
	for _, c := range benchCommands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	return cli.Usagef("unknown benchmark %q: want %s", args[0], strings.Join(benchNames(), ", "))
}

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

// cpuPeak measures the FMA peak of the cores (cpupeak) when the backend is the CPU; the zero
// Peak (no peak) otherwise.
func cpuPeak(be *ggml.Backend) cpupeak.Peak {
	if be.Name() != "CPU" {
		return cpupeak.Peak{}
	}
	return cpupeak.Measure(200 * time.Millisecond)
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

func parseBenchTypes(s string) ([]ggml.Type, error) {
	var types []ggml.Type
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, t := range benchTypes {
			if strings.EqualFold(ggml.TypeName(t), name) {
				types, found = append(types, t), true
				break
			}
		}
		if !found {
			var names []string
			for _, t := range benchTypes {
				names = append(names, ggml.TypeName(t))
			}
			return nil, fmt.Errorf("-types: unknown weight type %q (want %s)", name, strings.Join(names, ", "))
		}
	}
	return types, nil
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

// runBenchModel is `toy bench model`: prompt processing and generation speed like
// llama-bench, of a GGUF file or of random weights in a preset's shape.
func runBenchModel(args []string, stdout, stderr io.Writer) error {
	defer cli.OneGoProc()() // as toy generate decodes
	fs := flag.NewFlagSet("bench model", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF model file")
	pp := fs.Int("p", 128, "prompt tokens (processed as one batch)")
	tg := fs.Int("n", 32, "generated tokens (one at a time)")
	depth := fs.Int("d", 0, "tokens already in the cache before each test, as llama-bench's -d (pp and tg after a long context)")
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	reps := fs.Int("r", 5, "repetitions")
	kvType := fs.String("kv-type", "f16", "KV cache type: f16, q8_0 (needs -fa) or f32")
	fs.StringVar(kvType, "ctk", "f16", "alias of -kv-type (llama.cpp's name)")
	fa := fs.Bool("fa", false, "flash attention: the KV cache keeps values untransposed (-kv-type q8_0 needs it); ggml's fused kernel on a GPU, toy's own on the CPU")
	mmap := fs.Bool("mmap", false, "memory-map the model file instead of reading the weights into memory")
	random := fs.String("random", "", "instead of a file, bench random weights of a training preset's shape ("+strings.Join(config.LlamaPresetNames(), ", ")+"); -m is then empty")
	randomType := fs.String("random-type", "f16", "weight type of the -random model's matrices (f32, f16, bf16, q8_0, q4_0, q4_K, …)")
	draft := fs.String("draft", "", "also measure greedy speculative decoding with this draft GGUF (\"self\": the target's own file, every proposal accepted: the ceiling)")
	draftN := fs.Int("draft-n", speculative.DefaultDraftTokens, "tokens the draft proposes per verification step (with -draft)")
	promptFile := fs.String("prompt-file", "", "with -draft or -dflash: the prompt is the first -p tokens of this text file (default: -p random tokens)")
	dflashN := fs.Int("dflash-n", 0, "of each DFlash block, the proposals the target verifies (with -dflash; 0: all, the block size − 1)")
	pMins := fs.String("draft-p-min", "", "comma-separated minimum draft probabilities (with -draft or -dflash): a drafter stops proposing at a token it gives less; each value is measured as its own row (0: always γ; default 0.75 for -draft and 0 for -dflash, as toy generate)")
	allowUnresolved := cli.RegisterGate(fs)
	dflash := fs.String("dflash", "", "also measure greedy DFlash decoding with this drafter GGUF (made for -m by toy train -recipe dflash)")
	saveRandom := fs.String("save-random", "", "with -random: also keep the random model (with a synthetic tokenizer of its vocabulary) as this GGUF, so that llama.cpp can run the same file")
	draftLayers := fs.Int("draft-layers", 0, "with -random: also measure speculative decoding with a random draft of the preset's shape cut to this many layers (same vocabulary)")
	noDRAM := fs.Bool("no-dram", false, "do not measure the DRAM read bandwidth that generation's GB/s is a share of (about a second)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy bench model -m MODEL [-p 128] [-n 32] [-d 0] [-t 2] [-draft DRAFT.gguf] [-dflash DRAFTER.gguf]\n       toy bench model -random smollm2-135m [-random-type f16] ...\n\nPrompt-processing and generation tokens/s, mean ± standard deviation, as llama-bench reports.\n\n%s\nFlags:\n", benchModelBandwidthHelp)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.BenchModelCounts.Check(fs); err != nil {
		return err
	}
	if err := cli.UsableThreads(stderr, "bench model", threads); err != nil {
		return err
	}
	if *model == "" && *random == "" {
		return cli.Usagef("give -m MODEL or -random PRESET")
	}
	if *draftN < 1 {
		return cli.Usagef("-draft-n %d: want at least 1", *draftN)
	}
	if *depth < 0 || (*depth > 0 && (*draft != "" || *dflash != "")) {
		return cli.Usagef("-d %d: want a number of tokens, without -draft or -dflash", *depth)
	}
	if *dflashN < 0 {
		return cli.Usagef("-dflash-n %d: want at least 0", *dflashN)
	}
	if *draftLayers < 0 || (*draftLayers > 0 && (*random == "" || *draft != "")) {
		return cli.Usagef("-draft-layers %d: want a positive number of layers, with -random and without -draft", *draftLayers)
	}
	if *saveRandom != "" && *random == "" {
		return cli.Usagef("-save-random %s: give -random PRESET (the model to save)", *saveRandom)
	}
	if *random != "" {
		if *model != "" {
			return cli.Usagef("-m and -random exclude each other")
		}
		a, typ, err := randomShape(*random, *randomType)
		if err != nil {
			return err
		}
		if need := decoding.BenchPositions(*pp, *tg, *depth); need > a.Context {
			return cli.Usagef("-d %d with -p %d and -n %d: %d positions do not fit %s's context of %d", *depth, *pp, *tg, need, *random, a.Context)
		}
		dir, err := os.MkdirTemp("", "toy-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*model = filepath.Join(dir, *random+".gguf")
		if *saveRandom != "" {
			*model = *saveRandom
		}
		if err := writeRandom(*model, *random, *randomType, *saveRandom != "", stderr); err != nil {
			return err
		}
		if *saveRandom != "" {
			fmt.Fprintf(stderr, "toy bench: the random model is saved as %s (llama-bench -m %s runs the same weights)\n", *saveRandom, *saveRandom)
		}
		if *draftLayers > 0 {
			if *draftLayers > a.NLayers {
				return cli.Usagef("-draft-layers %d: %s has %d layers", *draftLayers, *random, a.NLayers)
			}
			a.NLayers = *draftLayers
			*draft = filepath.Join(dir, fmt.Sprintf("%s-%dl.gguf", *random, *draftLayers))
			fmt.Fprintf(stderr, "toy bench: writing a random %d-layer draft of %s's shape …\n", *draftLayers, *random)
			if err := transformer.WriteRandomGGUF(*draft, a, typ, 1); err != nil {
				return err
			}
		}
	}
	if *draft == "self" {
		*draft = *model
	}
	// The boot gate runs on each model the bench loads (the target, a draft), over the lookups
	// of toy's CPU operations its decoders make; the bench samples on the host.
	gate := func(m *decoding.GGUFModel, o decoding.DecoderOptions) error {
		_, _, err := cli.GateDecoders(stderr, "bench", m, m.Path(), "", o, *allowUnresolved)
		return err
	}
	d := cli.DecoderFlags{KVType: *kvType, FlashAttn: *fa, CtxFull: "error"}
	opts, err := d.Options()
	if err != nil {
		return err
	}
	if *draft != "" || *dflash != "" {
		draftMins, dflashMins := []float64{speculative.DefaultMinProbability}, []float64{0}
		if *pMins != "" {
			ps, err := parseProbabilities(*pMins)
			if err != nil {
				return cli.Usagef("-draft-p-min %q: %v", *pMins, err)
			}
			draftMins, dflashMins = ps, ps
		}
		var drafters []speculative.SpecDrafter
		var modes []string
		for i := range draftMins { // as many as dflashMins
			if *draft != "" {
				drafters, modes = append(drafters, speculative.SpecDrafter{Path: *draft, Gamma: *draftN, MinProbability: draftMins[i]}), append(modes, "speculative")
			}
			if *dflash != "" {
				drafters, modes = append(drafters, speculative.SpecDrafter{Path: *dflash, Gamma: *dflashN, DFlash: true, MinProbability: dflashMins[i]}), append(modes, "dflash")
			}
		}
		bo := decoding.BenchOptions{Decoder: opts, Reps: *reps, Mmap: *mmap, Gate: gate}
		if *promptFile != "" {
			if bo.Prompt, err = benchPrompt(*model, *promptFile, max(*pp, 1)); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "toy bench: greedy generation of %d tokens after %d: the target alone and %s, in turn …\n", *tg, *pp, strings.Join(modes, " and "))
		res, err := speculative.BenchSpeculative(*model, drafters, max(*pp, 1), max(*tg, 1), *threads, bo)
		if err != nil {
			return err
		}
		var rows []specRow
		for i, r := range res {
			rows = append(rows, specRow{modes[i], r})
		}
		writeSpecTable(stdout, rows)
		return nil
	}
	res, err := decoding.BenchStats(*model, *pp, *tg, *threads, decoding.BenchOptions{Decoder: opts, Reps: *reps, Mmap: *mmap, Depth: *depth, Gate: gate})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, res)
	reportGenBandwidth(stdout, stderr, res, !*noDRAM) // after the model is closed: its memory is free again
	return nil
}

// benchPrompt is the first n tokens of the text file path under the model's tokenizer.
func benchPrompt(model, path string, n int) ([]int32, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-prompt-file: %w", err)
	}
	f, err := ggml.OpenGGUF(model)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, err := f.Value(k); return v, err == nil })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model, err)
	}
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	if len(ids) == 0 {
		return nil, fmt.Errorf("-prompt-file %s: no tokens", path)
	}
	return ids[:min(n, len(ids))], nil
}

// randomShape is the architecture of a training preset's shape and the weight type of
// -random and -random-type (toy bench model and serve).
func randomShape(preset, typeName string) (transformer.Architecture, ggml.Type, error) {
	c, err := config.LlamaPreset(preset)
	if err != nil {
		return transformer.Architecture{}, 0, cli.AsUsage(err)
	}
	types, err := parseBenchTypes(typeName)
	if err != nil || len(types) != 1 {
		return transformer.Architecture{}, 0, cli.Usagef("-random-type %q: want one weight type", typeName)
	}
	return transformer.ArchitectureFromConfig(c), types[0], nil
}

// parseProbabilities parses a comma-separated list of minimum draft probabilities
// (speculative.CheckMinProbability).
func parseProbabilities(list string) ([]float64, error) {
	var ps []float64
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a probability in [0, 1)", f)
		}
		if err := speculative.CheckMinProbability(p); err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// specRow is one speculative mode's bench.
type specRow struct {
	mode string
	r    speculative.SpecBenchResult
}

// writeSpecTable prints speculative benches as llama-bench-style rows: the target alone, then
// each mode (its speed-up over the target alone measured in the same run), and where the
// speculative time went per generated token (other: the loop outside the timed phases).
func writeSpecTable(w io.Writer, rows []specRow) {
	r0 := rows[0].r
	fmt.Fprintf(w, "target %s (%.1fM params), %d threads, greedy, prompt %d\n", filepath.Base(r0.Target), float64(r0.TargetParams)/1e6, r0.Threads, r0.PromptTokens)
	for _, row := range rows {
		fmt.Fprintf(w, "%s: %s (%.2fM params)\n", row.mode, filepath.Base(row.r.Draft), float64(row.r.DraftParams)/1e6)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode        | test  |   γ | p-min |             t/s | speedup | accepted/step | accept % | draft ms/t | verify ms/t | accept ms/t | rollback ms/t | other ms/t | identical |")
	fmt.Fprintln(w, "| ----------- | ----- | --: | ----: | --------------: | ------: | ------------: | -------: | ---------: | ----------: | ----------: | ------------: | ---------: | --------- |")
	test := fmt.Sprintf("tg%d", r0.GenTokens)
	fmt.Fprintf(w, "| target      | %-5s |   – |     – | %15s |    1.00 |             – |        – |          – |           – |           – |             – |          – | –         |\n", test, r0.Plain)
	for _, row := range rows {
		r, st := row.r, row.r.Stats
		per := func(d time.Duration) string {
			if st.Generated == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", d.Seconds()*1e3/float64(st.Generated))
		}
		fmt.Fprintf(w, "| %-11s | %-5s | %3d | %5.2f | %15s | %7.2f | %13.2f | %8.1f | %10s | %11s | %11s | %13s | %10s | %-9v |\n", row.mode, test, r.Gamma, r.MinProbability, r.Spec, r.Speedup(),
			st.MeanAccepted(), 100*st.AcceptRate(), per(st.DraftTime), per(st.VerifyTime), per(st.AcceptTime), per(st.RollbackTime), per(r.Other()), r.Identical)
	}
}
