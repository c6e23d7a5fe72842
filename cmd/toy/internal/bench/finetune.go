package bench

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/cputime"
)

// benchFinetuneResult is the last line a -mode run prints, which the parent reads.
const benchFinetuneResult = "bench-finetune-result"

// runBenchFinetune is `toy bench finetune`: training tokens/s and peak resident memory of
// fine-tuning modes on random weights of a model shape. Each mode runs in its own child
// process (this binary with -mode), so each peak RSS (VmHWM) is that mode's alone; the
// parent writes the random base GGUFs once and reports the LoRA/full speed ratios of one run.
func runBenchFinetune(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench finetune", flag.ContinueOnError)
	preset := fs.String("preset", "smollm2-135m", "model shape: "+strings.Join(config.LlamaPresetNames(), ", "))
	modes := fs.String("modes", "lora-f16,lora-q8_0,full-f16", "comma-separated modes: lora-TYPE (LoRA on a frozen base of that weight type) or full-TYPE (full fine-tune, f32, of a base of that type)")
	mode := fs.String("mode", "", "run one mode in this process, on -base (what each child runs)")
	baseFile := fs.String("base", "", "with -mode: the base GGUF")
	seq := fs.Int("seq", 512, "tokens per sequence")
	batch := fs.Int("batch", 1, "sequences per step")
	steps := fs.Int("steps", 3, "timed steps per mode (after one warm-up step)")
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	rank := fs.Int("r", 16, "LoRA rank")
	targets := fs.String("lora-targets", "q,v", "LoRA targets")
	recompute := fs.Int("recompute", 0, "LoRA modes recompute the first N blocks in the backward pass instead of keeping their activations (less memory, one more forward pass of them)")
	recomputeAttention := fs.Bool("recompute-attention", false, "LoRA modes recompute the other blocks' attention probabilities in the backward pass instead of keeping them")
	keepTransposed := fs.Bool("keep-transposed", false, "LoRA modes on a block-quantized base keep a transposed f32 copy of each weight for the backward pass (4 bytes a parameter) instead of making it each step, where a copy is needed (not on a CPU whose vector kernels toy built: its GEMM reads the weights transposed in place)")
	dir := fs.String("dir", "", "where the random bases are written (default: a temporary directory, removed after)")
	allow := cli.RegisterGate(fs)
	profile := fs.Int("profile", 0, "after the timed steps, run one more computing each graph node by node and print (to stderr) the N costliest kinds of node and single nodes, and the N largest kinds of tensor the largest graph holds at its peak")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy bench finetune [flags]

Times fine-tuning steps (forward, backward, AdamW) on random weights of a model shape and
random tokens: LoRA on a frozen base of each weight type, and a full fine-tune (every weight
in f32). Each mode runs in a child process, whose peak resident memory (VmHWM) is reported.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.BenchFTCounts.Check(fs); err != nil {
		return err
	}
	if *threads < 0 || *seq < 1 || *batch < 1 || *steps < 1 || *rank < 1 {
		return cli.Usagef("-t %d, -seq %d, -batch %d, -steps %d, -r %d: want at least 1 (-t 0: one per core)", *threads, *seq, *batch, *steps, *rank)
	}
	c, err := config.LlamaPreset(*preset)
	if err != nil {
		return cli.AsUsage(err)
	}
	if *recompute < 0 || *recompute > c.NLayers {
		return cli.Usagef("-recompute %d: the %s shape has %d blocks", *recompute, *preset, c.NLayers)
	}
	if *seq > c.Context {
		return cli.Usagef("-seq %d exceeds the %s context %d", *seq, *preset, c.Context)
	}
	var list []benchMode
	for _, m := range strings.Split(*modes, ",") {
		bm, err := parseBenchMode(m)
		if err != nil {
			return cli.AsUsage(err)
		}
		list = append(list, bm)
	}
	if *mode != "" {
		bm, err := parseBenchMode(*mode)
		if err != nil {
			return cli.AsUsage(err)
		}
		if *baseFile == "" {
			return cli.Usagef("-mode needs -base")
		}
		if err := cli.UsableThreads(stderr, "bench finetune", threads); err != nil {
			return err
		}
		lo := training.LoRAOptions{Rank: *rank, Alpha: float32(2 * *rank), Targets: strings.Split(*targets, ","), Seed: 1, Recompute: *recompute, RecomputeAttention: *recomputeAttention, KeepTransposed: *keepTransposed}
		return benchFinetuneMode(stdout, stderr, bm, *baseFile, *seq, *batch, *steps, *threads, *profile, lo, *allow)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "toy-bench-finetune"); err != nil {
			return err
		}
		defer os.RemoveAll(*dir)
	} else if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	arch := transformer.ArchitectureFromConfig(c)
	bases := map[ggml.Type]string{}
	for _, bm := range list {
		if bases[bm.typ] != "" {
			continue
		}
		path := filepath.Join(*dir, fmt.Sprintf("%s-%s.gguf", *preset, ggml.TypeName(bm.typ)))
		if _, err := os.Stat(path); err != nil {
			t0 := time.Now()
			if err := transformer.WriteRandomGGUF(path, arch, bm.typ, 1); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote a random %s base (%s) in %.0fs\n", *preset, ggml.TypeName(bm.typ), time.Since(t0).Seconds())
		}
		bases[bm.typ] = path
	}
	attention := ""
	if *recomputeAttention {
		attention = " and the others' attention probabilities"
	}
	if *keepTransposed {
		attention += ", keeping quantized weights' transposes"
	}
	fmt.Fprintf(stdout, "%s, batch %d × %d tokens, %d threads, LoRA rank %d on %s recomputing %d blocks%s; %d timed steps a mode, each mode in its own process\n",
		*preset, *batch, *seq, *threads, *rank, *targets, *recompute, attention, *steps)
	fmt.Fprintf(stdout, "%-12s %10s %8s %12s %10s %12s %14s\n", "mode", "trained M", "s/step", "CPU s/step", "tokens/s", "compute MiB", "peak RSS MiB")
	tps, cpus := map[string]float64{}, map[string]float64{} // tokens/s and processor s/step by mode
	for _, bm := range list {
		cmd := exec.Command(self, "bench", "finetune", "-mode", bm.name, "-base", bases[bm.typ], "-seq", fmt.Sprint(*seq), "-batch", fmt.Sprint(*batch),
			"-steps", fmt.Sprint(*steps), "-t", fmt.Sprint(*threads), "-r", fmt.Sprint(*rank), "-lora-targets", *targets, "-recompute", fmt.Sprint(*recompute), "-preset", *preset, "-profile", fmt.Sprint(*profile),
			fmt.Sprintf("-recompute-attention=%v", *recomputeAttention), fmt.Sprintf("-keep-transposed=%v", *keepTransposed), fmt.Sprintf("--%s=%v", cli.AllowUnresolvedFlag, *allow))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("mode %s: %w\n%s", bm.name, err, out.String())
		}
		var params, sec, rate, peak, compute, cpu float64
		sc := bufio.NewScanner(&out)
		found := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 7 && f[0] == benchFinetuneResult {
				params, _ = strconv.ParseFloat(f[1], 64)
				sec, _ = strconv.ParseFloat(f[2], 64)
				rate, _ = strconv.ParseFloat(f[3], 64)
				peak, _ = strconv.ParseFloat(f[4], 64)
				compute, _ = strconv.ParseFloat(f[5], 64)
				cpu, _ = strconv.ParseFloat(f[6], 64)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("mode %s printed no result:\n%s", bm.name, out.String())
		}
		tps[bm.name], cpus[bm.name] = rate, cpu
		fmt.Fprintf(stdout, "%-12s %10.2f %8.2f %12.2f %10.1f %12.0f %14.0f\n", bm.name, params/1e6, sec, cpu, rate, compute, peak)
	}
	for _, a := range list {
		for _, b := range list {
			if a.lora && !b.lora && tps[b.name] > 0 {
				fmt.Fprintf(stdout, "%s / %s: %.2f× the tokens/s, %.2f× by processor time (steadier on a busy machine)\n", a.name, b.name, tps[a.name]/tps[b.name], cpus[b.name]/cpus[a.name])
			}
		}
	}
	return nil
}

// benchMode is lora-TYPE or full-TYPE.
type benchMode struct {
	name string
	lora bool
	typ  ggml.Type
}

func parseBenchMode(s string) (benchMode, error) {
	kind, typName, _ := strings.Cut(strings.TrimSpace(s), "-")
	bm := benchMode{name: strings.TrimSpace(s), lora: kind == "lora"}
	if kind != "lora" && kind != "full" {
		return bm, fmt.Errorf("mode %q: want lora-TYPE or full-TYPE (lora-q8_0, full-f16, ...)", s)
	}
	for t := ggml.Type(0); t < 64; t++ {
		if ggml.ValidType(t) && strings.EqualFold(ggml.TypeName(t), typName) {
			bm.typ = t
			return bm, nil
		}
	}
	return bm, fmt.Errorf("mode %q: %q is not a ggml weight type", s, typName)
}

// benchFinetuneMode times one mode in this process and prints its result line.
func benchFinetuneMode(stdout, stderr io.Writer, bm benchMode, path string, seq, batch, steps, threads, profile int, lo training.LoRAOptions, allow bool) error {
	be, err := ggml.NewBackend(threads)
	if err != nil {
		return err
	}
	defer be.Close()
	base, err := decoding.OpenModel(path, decoding.ModelOptions{Backend: be})
	if err != nil {
		return err
	}
	defer func() { base.Close() }()
	vocab := base.Arch.Vocab
	arch, names := base.Arch, cli.ModelRef(base, path, "").Names
	var tr *training.Trainer
	var trained int64
	opt := train.LoRA()
	if bm.lora {
		ad, err := training.NewAdapter(base, lo)
		if err != nil {
			return err
		}
		defer ad.Close()
		if err := ad.Init(); err != nil {
			return err
		}
		trained = ad.Params()
		gated, _, err := cli.GateTrainable(stderr, "bench finetune", &arch, names, ad, allow)
		if err != nil {
			return err
		}
		if tr, err = training.NewTrainer(gated, seq, batch); err != nil {
			return err
		}
	} else {
		m, err := training.FromGGUF(base, be)
		if err != nil {
			return err
		}
		defer m.Close()
		base.Close() // the f32 copy is all a full fine-tune keeps
		base = nil
		trained = m.Params()
		opt.LR, opt.WeightDecay = 5e-5, 0.01
		gated, _, err := cli.GateTrainable(stderr, "bench finetune", &arch, names, m, allow)
		if err != nil {
			return err
		}
		if tr, err = training.NewTrainer(gated, seq, batch); err != nil {
			return err
		}
	}
	defer tr.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]int32, batch)
	for i := range seqs {
		seqs[i] = make([]int32, seq+1)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(vocab))
		}
	}
	var total, totalCPU time.Duration
	for s := 0; s <= steps; s++ {
		d, _ := opt.Params(s, opt.LR, true)
		nd, _ := opt.Params(s, opt.LR, false)
		t0, c0 := time.Now(), cputime.Process()
		loss, err := tr.Step(seqs, d, nd)
		if err != nil {
			return err
		}
		dt, dc := time.Since(t0), cputime.Process()-c0
		if s > 0 {
			total, totalCPU = total+dt, totalCPU+dc
		}
		rss, hwm := memory()
		fmt.Fprintf(stdout, "%s step %d: loss %.4f, %.2f s (processor %.2f s), RSS %.0f MiB (peak %.0f)\n", bm.name, s, loss, dt.Seconds(), dc.Seconds(), rss, hwm)
	}
	sec := total.Seconds() / float64(steps)
	_, hwm := memory()
	if profile > 0 {
		d, _ := opt.Params(steps+1, opt.LR, true)
		nd, _ := opt.Params(steps+1, opt.LR, false)
		if err := profileStep(stderr, bm.name, tr, func() error { _, err := tr.Step(seqs, d, nd); return err }, profile); err != nil {
			return err
		}
		printPeaks(stderr, bm.name, tr, profile)
	}
	fmt.Fprintf(stdout, "%s %d %.4f %.2f %.0f %.0f %.4f\n", benchFinetuneResult, trained, sec, float64(batch*seq)/sec, hwm, float64(tr.ComputeBytes())/(1<<20), totalCPU.Seconds()/float64(steps))
	return nil
}

// printPeaks writes what each of tr's graphs holds at its peak and, by kind of tensor, the n
// largest shares of the largest peak.
func printPeaks(w io.Writer, mode string, tr *training.Trainer, n int) {
	peaks := tr.PeakLive()
	top := 0
	for i, gp := range peaks {
		fmt.Fprintf(w, "%s: graph %d of %d holds %.1f MiB at its peak (node %d, %d tensors)\n", mode, i+1, len(peaks), float64(gp.Bytes)/(1<<20), gp.Node, len(gp.Live))
		if gp.Bytes > peaks[top].Bytes {
			top = i
		}
	}
	by, count := map[string]int{}, map[string]int{}
	for _, l := range peaks[top].Live {
		t := l.Tensor
		k := fmt.Sprintf("%s %s %v", t.OpName(), ggml.TypeName(t.Type()), t.Shape())
		if s := t.Src(0); s != nil {
			k += fmt.Sprintf(" ← %s %v", s.OpName(), s.Shape())
		}
		by[k] += l.Bytes
		count[k]++
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]] > by[keys[j]] })
	fmt.Fprintf(w, "%s: graph %d's peak by kind of tensor:\n", mode, top+1)
	for _, k := range keys[:min(n, len(keys))] {
		fmt.Fprintf(w, "  %8.1f MiB %4d× %s\n", float64(by[k])/(1<<20), count[k], k)
	}
}
