package bench

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/blasgemm"
	"github.com/toyml/toy/internal/cputime"
)

// runBenchTrain measures training throughput of a model shape on random tokens: tokens/s, the
// model FLOP rate (6·params·tokens per second) as a share of the f32 matmul ceiling measured in
// the same run, of OpenBLAS's sgemm on the same shape (where installed) and of the cores' FMA
// peak, and the resident memory as steps go by (it must stay
// flat).
func runBenchTrain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench train", flag.ContinueOnError)
	preset := fs.String("preset", "smollm2-135m", "model shape: "+strings.Join(append(config.LlamaPresetNames(), config.Gpt2PresetNames()...), ", "))
	seq := fs.Int("seq", 512, "tokens per sequence")
	batch := fs.Int("batch", 1, "sequences per step")
	steps := fs.Int("steps", 10, "timed steps (after one warm-up step)")
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	vs := fs.String("vs", "", "also time this preset, its steps alternating with -preset's, and print the ratio of their utilizations (a comparison under the same load)")
	profile := fs.Int("profile", 0, "after the timed steps, compute one more step node by node and print where its time goes: by op, and the `N` costliest kinds of node (op, operand types and shapes)")
	allow := cli.RegisterGate(fs)
	ceiling := fs.Bool("ceiling", true, "measure the f32 matmul ceiling first (the faster of ggml's GEMM and, on a CPU, the trainer's own, on 4096×512×14336), and OpenBLAS's sgemm on it where installed, for the utilization ratios")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy bench train [flags]\n\nTimes training steps (forward, backward, AdamW) of a model shape on random tokens.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.BenchTrainCounts.Check(fs); err != nil {
		return err
	}
	if err := cli.UsableThreads(stderr, "bench train", threads); err != nil {
		return err
	}
	presets := []string{*preset}
	if *vs != "" {
		presets = append(presets, *vs)
	}
	shapes := make([]trainShape, len(presets))
	for i, p := range presets {
		var err error
		if shapes[i], err = presetShape(p); err != nil {
			return err
		}
		if *seq > shapes[i].context {
			return cli.Usagef("-seq %d exceeds the %s context %d", *seq, p, shapes[i].context)
		}
	}
	be, err := ggml.NewBackend(*threads)
	if err != nil {
		return err
	}
	defer be.Close()
	benches := make([]*trainBench, len(shapes))
	packed := false // toy's packed f32 GEMM resolved for the first model: the ceiling times it
	for i, sh := range shapes {
		b, err := newTrainBench(be, sh, *seq, *batch, func(m *training.Model) (training.Trainable, error) {
			tm, resolved, err := cli.GateTrainable(stderr, "bench train", &m.Arch, []string{sh.name}, m, *allow)
			packed = packed || i == 0 && slices.Contains(resolved, decoding.NeedPacked(ggml.F32))
			return tm, err
		})
		if err != nil {
			return err
		}
		defer b.close()
		benches[i] = b
	}
	cores := cpuPeak(be)
	fmaPeak := cores.GFLOPS(be.Threads())
	if fmaPeak > 0 {
		fmt.Fprintf(stdout, "FMA peak (f32): %s\n", cores.String(be.Threads()))
	}
	peak, blasPeak := 0.0, 0.0
	if *ceiling {
		r, err := ggml.MeasureMatMul(be, ggml.F32, 4096, 512, 14336, 2*time.Second)
		if err != nil {
			return err
		}
		peak = r.GFLOPS()
		fmt.Fprintf(stdout, "ggml's f32 matmul (4096×512×14336, %d threads): %.1f GFLOP/s\n", be.Threads(), peak)
		if be.IsCPU() && ggml.CPUKernelsFast() && packed {
			// The trainer's own GEMM on the CPU (ggml.MulMatPacked): the ceiling is the faster.
			r, err := ggml.MeasurePackedMatMul(be, ggml.F32, 4096, 512, 14336, 2*time.Second)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "toy's packed f32 GEMM (the same shape): %.1f GFLOP/s (%.2f× ggml's)\n", r.GFLOPS(), r.GFLOPS()/peak)
			peak = max(peak, r.GFLOPS())
		} else if be.IsCPU() && ggml.CPUKernelsFast() {
			fmt.Fprintf(stdout, "toy's packed f32 GEMM: not timed (its kernel lookup did not resolve for %s)\n", shapes[0].name)
		}
		fmt.Fprintf(stdout, "f32 matmul ceiling: %.1f GFLOP/s\n", peak)
		if b, err := blasgemm.Measure(be.Threads(), 4096, 512, 14336, 2*time.Second); err == nil {
			blasPeak = b.GFLOPS
			fmt.Fprintf(stdout, "OpenBLAS sgemm (4096×512×14336, %d threads): %.1f GFLOP/s (the ceiling is %.2f× it)\n", be.Threads(), blasPeak, peak/blasPeak)
		} else {
			fmt.Fprintf(stdout, "OpenBLAS sgemm: not measured (%v)\n", err)
		}
	}
	for i, sh := range shapes {
		b := benches[i]
		fmt.Fprintf(stdout, "model %s: %.1fM parameters, batch %d × %d tokens, compute buffer %.0f MiB\n",
			sh.name, float64(b.m.Params())/1e6, *batch, *seq, float64(b.tr.ComputeBytes())/(1<<20))
	}
	if len(benches) > 1 {
		fmt.Fprintf(stdout, "steps alternate between %s and %s, so both see the same machine\n", presets[0], presets[1])
	}
	opt := train.FromScratch()
	fmt.Fprintf(stdout, "%-14s %6s %10s %10s %12s %12s\n", "model", "step", "loss", "tokens/s", "RSS MiB", "peak MiB")
	for s := 0; s <= *steps; s++ {
		d, _ := opt.Params(s, opt.LR, true)
		nd, _ := opt.Params(s, opt.LR, false)
		for _, b := range benches {
			t0, c0 := time.Now(), cputime.Process()
			loss, err := b.tr.Step(b.seqs, d, nd)
			if err != nil {
				return err
			}
			dt := time.Since(t0)
			if s > 0 {
				b.total += dt
				b.cpu += cputime.Process() - c0
			}
			rss, hwm := memory()
			if s <= 1 || s%max(1, *steps/10) == 0 || s == *steps {
				fmt.Fprintf(stdout, "%-14s %6d %10.4f %10.1f %12.0f %12.0f\n", b.name, s, loss, float64(*batch**seq)/dt.Seconds(), rss, hwm)
			}
		}
	}
	var gflops []float64
	for _, b := range benches {
		sec := b.total.Seconds() / float64(*steps)
		tps := float64(*batch**seq) / sec
		g := 6 * float64(b.m.Params()) * tps / 1e9
		gflops = append(gflops, g)
		fmt.Fprintf(stdout, "%s: mean over %d steps: %.2f s/step (CPU %.2f s/step), %.1f tokens/s, %.1f GFLOP/s (6·params·tokens)", b.name, *steps, sec, b.cpu.Seconds()/float64(*steps), tps, g)
		if peak > 0 {
			fmt.Fprintf(stdout, ", %.0f%% of the matmul ceiling", 100*g/peak)
		}
		if blasPeak > 0 {
			fmt.Fprintf(stdout, ", %.0f%% of OpenBLAS's sgemm", 100*g/blasPeak)
		}
		if fmaPeak > 0 {
			fmt.Fprintf(stdout, ", %.0f%% of the FMA peak", 100*g/fmaPeak)
		}
		fmt.Fprintln(stdout)
	}
	if len(gflops) > 1 {
		fmt.Fprintf(stdout, "utilization of %s relative to %s: %.2f\n", presets[0], presets[1], gflops[0]/gflops[1])
	}
	if *profile > 0 {
		d, _ := opt.Params(*steps+1, opt.LR, true)
		nd, _ := opt.Params(*steps+1, opt.LR, false)
		for _, b := range benches {
			if err := profileStep(stdout, b.name, b.tr, func() error { _, err := b.tr.Step(b.seqs, d, nd); return err }, *profile); err != nil {
				return err
			}
		}
	}
	return nil
}

// trainShape is a preset of either family: its name, what random tokens and -seq need, and
// how to allocate its model.
type trainShape struct {
	name           string
	vocab, context int
	newModel       func(*ggml.Backend) (*training.Model, error)
}

// presetShape finds a language model's preset by name among the families toy train makes
// (cli.TrainFamilies): the model its -preset gives, as toy train builds it.
func presetShape(name string) (trainShape, error) {
	f := cli.FamilyNamed(cli.PresetFamily(name))
	if f == nil || f.ModelFlags == nil {
		var lists []string
		for _, f := range cli.TrainFamilies {
			if f.ModelFlags != nil {
				lists = append(lists, f.Name+": "+strings.Join(f.Presets(), ", "))
			}
		}
		return trainShape{}, cli.Usagef("unknown preset %q (%s)", name, strings.Join(lists, "; "))
	}
	s, preset := recipes.DefaultScratch(), name
	if err := f.ModelFlags(flag.NewFlagSet(name, flag.ContinueOnError), &s, name, &preset)(); err != nil {
		return trainShape{}, err
	}
	return trainShape{name, s.Architecture().Vocab, s.Context(), s.NewModel}, nil
}

// trainBench is one model being timed: its trainer, its batch of random tokens, its time.
type trainBench struct {
	name  string
	m     *training.Model
	tr    *training.Trainer
	seqs  [][]int32
	total time.Duration
	// cpu is the process's CPU time over the timed steps: with one thread on a busy machine,
	// where the wall time depends on what else runs, the steadier measure of the work.
	cpu time.Duration
}

// newTrainBench builds sh's model and its trainer, which runs what gate (the kernel gate)
// resolved for the model.
func newTrainBench(be *ggml.Backend, sh trainShape, seq, batch int, gate func(*training.Model) (training.Trainable, error)) (*trainBench, error) {
	m, err := sh.newModel(be)
	if err != nil {
		return nil, err
	}
	if err := m.Init(); err != nil {
		m.Close()
		return nil, err
	}
	tm, err := gate(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	tr, err := training.NewTrainer(tm, seq, batch)
	if err != nil {
		m.Close()
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]int32, batch)
	for i := range seqs {
		seqs[i] = make([]int32, seq+1)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(sh.vocab))
		}
	}
	return &trainBench{name: sh.name, m: m, tr: tr, seqs: seqs}, nil
}

func (b *trainBench) close() {
	b.tr.Close()
	b.m.Close()
}
