package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// runBenchTrain measures training throughput of a model shape on random tokens: tokens/s, the
// model FLOP rate (6·params·tokens per second) as a share of the f32 matmul ceiling measured in
// the same run, and the resident memory as steps go by (it must stay flat).
func runBenchTrain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench train", flag.ContinueOnError)
	preset := fs.String("preset", "smollm2-135m", "model shape: "+strings.Join(append(config.LlamaPresetNames(), config.Gpt2PresetNames()...), ", "))
	seq := fs.Int("seq", 512, "tokens per sequence")
	batch := fs.Int("batch", 1, "sequences per step")
	steps := fs.Int("steps", 10, "timed steps (after one warm-up step)")
	threads := fs.Int("t", 2, "CPU threads")
	ceiling := fs.Bool("ceiling", true, "measure the f32 matmul ceiling (4096×512×14336) first, for the utilization ratio")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: toy bench train [flags]\n\nTimes training steps (forward, backward, AdamW) of a model shape on random tokens.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *threads < 0 {
		return usagef("-t %d: want at least 1 thread (0: one per core)", *threads)
	}
	usableThreads(stderr, "bench train", threads)
	// newModel allocates the preset's model: a llama or a GPT-2 one, by the preset's family.
	var newModel func(*ggml.Backend) (*llama.Model, error)
	var vocab, context int
	if g, err := config.Gpt2Preset(*preset); err == nil {
		vocab, context = g.Vocab, g.Context
		newModel = func(be *ggml.Backend) (*llama.Model, error) { return llama.NewGPT2(g, be) }
	} else {
		c, err := config.LlamaPreset(*preset)
		if err != nil {
			return usagef("unknown preset %q (llama: %s; gpt2: %s)", *preset, strings.Join(config.LlamaPresetNames(), ", "), strings.Join(config.Gpt2PresetNames(), ", "))
		}
		vocab, context = c.Vocab, c.Context
		newModel = func(be *ggml.Backend) (*llama.Model, error) { return llama.New(c, be) }
	}
	if *seq > context {
		return usagef("-seq %d exceeds the %s context %d", *seq, *preset, context)
	}
	be, err := ggml.NewBackend(*threads)
	if err != nil {
		return err
	}
	defer be.Close()
	peak := 0.0
	if *ceiling {
		r, err := ggml.MeasureMatMul(be, ggml.F32, 4096, 512, 14336, 2*time.Second)
		if err != nil {
			return err
		}
		peak = r.GFLOPS()
		fmt.Fprintf(stdout, "f32 matmul ceiling (4096×512×14336, %d threads): %.1f GFLOP/s\n", be.Threads(), peak)
	}
	m, err := newModel(be)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Init(); err != nil {
		return err
	}
	tr, err := llama.NewTrainer(m, *seq, *batch)
	if err != nil {
		return err
	}
	defer tr.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]int32, *batch)
	for i := range seqs {
		seqs[i] = make([]int32, *seq+1)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(vocab))
		}
	}
	opt := train.FromScratch()
	fmt.Fprintf(stdout, "model %s: %.1fM parameters, batch %d × %d tokens, compute buffer %.0f MiB\n",
		*preset, float64(m.Params())/1e6, *batch, *seq, float64(tr.ComputeBytes())/(1<<20))
	fmt.Fprintf(stdout, "%6s %10s %10s %12s %12s\n", "step", "loss", "tokens/s", "RSS MiB", "peak MiB")
	var total time.Duration
	for s := 0; s <= *steps; s++ {
		d, _ := opt.Params(s, opt.LR, true)
		nd, _ := opt.Params(s, opt.LR, false)
		t0 := time.Now()
		loss, err := tr.Step(seqs, d, nd)
		if err != nil {
			return err
		}
		dt := time.Since(t0)
		if s > 0 {
			total += dt
		}
		rss, hwm := memory()
		if s <= 1 || s%max(1, *steps/10) == 0 || s == *steps {
			fmt.Fprintf(stdout, "%6d %10.4f %10.1f %12.0f %12.0f\n", s, loss, float64(*batch**seq)/dt.Seconds(), rss, hwm)
		}
	}
	sec := total.Seconds() / float64(*steps)
	tps := float64(*batch**seq) / sec
	gflops := 6 * float64(m.Params()) * tps / 1e9
	fmt.Fprintf(stdout, "mean over %d steps: %.2f s/step, %.1f tokens/s, %.1f GFLOP/s (6·params·tokens)", *steps, sec, tps, gflops)
	if peak > 0 {
		fmt.Fprintf(stdout, ", %.0f%% of the matmul ceiling", 100*gflops/peak)
	}
	fmt.Fprintln(stdout)
	return nil
}

// memory reads the process's resident set and its peak from /proc (0 where unavailable).
func memory() (rss, peak float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}
