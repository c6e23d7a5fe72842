package train

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
)

// runTrainDFlash is `toy train -recipe dflash`: a DFlash drafter for a target model, distilled
// from the target's own predictions (speculative.TrainDFlash).
func runTrainDFlash(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("train -recipe dflash", flag.ContinueOnError)
	fs.String("recipe", "dflash", "dflash")
	targetPath := fs.String("target", "", "the target GGUF model the drafter drafts for (required)")
	text := fs.String("data", "", "a text file or directory to distil on (default: the Go standard library's source)")
	maxBytes := fs.Int64("max-text-bytes", 8<<20, "read at most this much text (0: all)")
	generated := fs.Int("generated", 0, "distil on this many sequences the target generates greedily (after prompts from the data) instead of the data itself")
	out := fs.String("o", "", "the drafter GGUF to write (default: the draft_model the kernel table pairs with the target, beside it; else dflash.gguf beside it)")
	// The pairing's flags default to the spec's values; one not given takes the table's pairing
	// where there is one.
	pairing := config.DefaultDFlash()
	pairing.RegisterFlags(fs)
	layerIDs := fs.String("target-layers", "", "comma-separated target layers whose hidden states the drafter reads (default: the table's pairing, else 3 spread over the target)")
	layers := fs.Int("layers", 2, "the drafter's transformer blocks (the paper uses 3 to 5 on 8B targets; on toy's 30M Go model 2 gained more in acceptance than they cost: docs/PERFORMANCE.md)")
	schedule, _ := config.TrainingPreset("dflash")
	schedule.RegisterFlags(fs, "steps", "lr", "min-lr", "warmup", "seed")
	steps, lr, minLR, warmup, seed := &schedule.Steps, &schedule.LR, &schedule.MinLR, &schedule.Warmup, &schedule.Seed
	seqs := fs.Int("seqs", 4, "corpus windows the target reads per step")
	windows := config.DefaultSequences()
	windows.RegisterFlags(fs, "seq")
	seqLen := &windows.SeqLen
	anchors := fs.Int("anchors", 16, "blocks per window")
	trainWindow := fs.Int("train-window", 64, "context rows a training block reads when -window is 0")
	decay := fs.Float64("loss-decay", 4, "weigh the loss of a block's k-th proposal (from 0) by exp(-k/decay), as DFlash does: the first proposals decide how many are accepted (0: all alike)")
	compute := config.DefaultCompute()
	compute.RegisterFlags(fs)
	threads := &compute.Threads
	modelName := fs.String("model-name", "", "a name to match the target against the kernel table's entries")
	allowUnresolved := cli.RegisterGate(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy train -recipe dflash -target T.gguf [-data FILE|DIR] [flags]

Trains a DFlash drafter for the target: a small transformer that fills a block of masked
positions in one forward pass from the target's hidden states (docs/INFERENCE.md). Each step the
target reads -seqs windows of the data, capturing its hidden states at the target layers; the
drafter learns to put at each block position the token the target predicts there. The result is
a GGUF holding the drafter and its pairing (block size, window, mask token, target layers, the
target's shape); toy generate -dflash runs it where the kernel table pairs it with the model.
The pairing's defaults come from the table's [dflash] declaration for the target.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.DFlashCounts.Check(fs); err != nil {
		return err
	}
	if *targetPath == "" {
		return cli.Usagef("-target T.gguf is required")
	}
	if err := cli.UsableThreads(stderr, "train", threads); err != nil {
		return err
	}
	m, err := decoding.OpenModel(*targetPath, decoding.ModelOptions{Threads: *threads})
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	if err != nil {
		return fmt.Errorf("%s: %w", *targetPath, err)
	}
	// The target's decoders run toy's kernels as toy generate's do (they read the data and
	// capture the hidden states the drafter learns from); the drafter's graph is ggml's.
	entry, named, err := cli.GateDecoders(stderr, "train", m, *targetPath, *modelName, decoding.DecoderOptions{Threads: *threads}, *allowUnresolved)
	if err != nil {
		return err
	}
	var decl *kernels.DFlash
	if entry != nil && named {
		decl = entry.DFlash
	}
	cfg := speculative.DFlashConfig{Gamma: pairing.Gamma, Window: pairing.WindowSize, MaskToken: pairing.MaskTokenID,
		Layers: *layers, TargetLayers: speculative.DefaultTargetLayers(m.Arch.NLayers, 3)}
	if decl != nil {
		set := cli.SetFlags(fs)
		if !set["gamma"] {
			cfg.Gamma = decl.Gamma
		}
		if !set["window"] {
			cfg.Window = decl.WindowSize
		}
		if !set["mask-token"] {
			cfg.MaskToken = decl.MaskTokenID
		}
		if len(decl.TargetLayerIDs) > 0 {
			cfg.TargetLayers = decl.TargetLayerIDs
		}
	}
	if *layerIDs != "" {
		cfg.TargetLayers = nil
		for _, f := range strings.Split(*layerIDs, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return cli.Usagef("-target-layers %q: want comma-separated layer numbers", *layerIDs)
			}
			cfg.TargetLayers = append(cfg.TargetLayers, id)
		}
	}
	if err := cfg.Check(m); err != nil {
		return cli.AsUsage(err)
	}
	if *out == "" {
		*out = filepath.Join(filepath.Dir(*targetPath), "dflash.gguf")
		if decl != nil && !filepath.IsAbs(decl.DraftModel) {
			*out = filepath.Join(filepath.Dir(*targetPath), decl.DraftModel)
		}
	}

	var docs []data.Document
	if *text == "" {
		root, err := data.GoRoot()
		if err != nil {
			return err
		}
		if docs, _, err = data.GoSource(root, *maxBytes); err != nil {
			return err
		}
	} else if docs, err = data.ReadTexts(*text, *maxBytes); err != nil {
		return err
	}
	var corpus []int32
	for _, d := range docs {
		corpus = append(corpus, tok.Encode(string(d.Text), tokenizer.EncodeOptions{})...)
		if tok.EOS() >= 0 {
			corpus = append(corpus, tok.EOS())
		}
	}
	fmt.Fprintf(stdout, "toy train: dflash drafter for %s (%d layers, width %d): block %d, window %d, mask token %d, target layers %v, %d drafter layers\n",
		*targetPath, m.Arch.NLayers, m.Arch.DModel, cfg.Gamma, cfg.Window, cfg.MaskToken, cfg.TargetLayers, cfg.Layers)
	fmt.Fprintf(stdout, "toy train: %d tokens of data\n", len(corpus))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A sixteenth of the text is held out (the last prompts' generations, or the data's end, at
	// most 16 windows of it): after training, the drafter is measured on it (speculative.EvalDFlash).
	var heldOut []int32
	if *generated > 0 {
		prompts, err := speculative.TeacherPrompts(corpus, *generated, speculative.TeacherPromptTokens, *seed)
		if err != nil {
			return err
		}
		t0 := time.Now()
		held := 0
		if *generated >= 2 {
			held = max(1, *generated/16)
		}
		greedy, opts := sample.GreedyParams(), decoding.DecoderOptions{Threads: *threads}
		if corpus, err = speculative.TargetText(ctx, m, prompts[:*generated-held], *seqLen, greedy, opts, nil); err != nil {
			return err
		}
		if held > 0 {
			if heldOut, err = speculative.TargetText(ctx, m, prompts[*generated-held:], *seqLen, greedy, opts, nil); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "toy train: the target generated %d tokens in %.1f s (%d of them held out)\n", len(corpus)+len(heldOut), time.Since(t0).Seconds(), len(heldOut))
	} else if n := min(len(corpus)/16, 16**seqLen); n >= *seqLen {
		corpus, heldOut = corpus[:len(corpus)-n], corpus[len(corpus)-n:]
		fmt.Fprintf(stdout, "toy train: the last %d tokens held out\n", n)
	}
	t0 := time.Now()
	df, err := speculative.TrainDFlash(m, cfg, corpus, speculative.DFlashTrainOptions{
		Steps: *steps, Sequences: *seqs, SeqLen: min(*seqLen, m.Arch.Context), Anchors: *anchors, Window: *trainWindow,
		LossDecay: *decay, AdamW: train.FromScratch(), LR: *lr, MinLR: *minLR, Warmup: min(*warmup, *steps-1), Seed: *seed,
		DecoderOptions: decoding.DecoderOptions{Threads: *threads}, Interrupted: ctx,
		Progress: func(step int, loss, acc, lr float64) {
			if step%10 == 0 || step == *steps-1 {
				fmt.Fprintf(stdout, "step %5d  loss %.4f  proposals matching the target %.1f %%  lr %.2e  %.1f s\n", step, loss, 100*acc, lr, time.Since(t0).Seconds())
			}
		}})
	if err != nil {
		return err
	}
	defer df.Close()
	if err := df.Save(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "toy train: wrote %s (%.2fM parameters; the target's embeddings and head are shared)\n", *out, float64(df.Params())/1e6)
	if len(heldOut) > 0 && ctx.Err() == nil {
		ev, err := speculative.EvalDFlash(df, heldOut, min(*seqLen, m.Arch.Context), decoding.DecoderOptions{Threads: *threads})
		if err != nil {
			return err
		}
		var by []string
		for _, f := range ev.Matching {
			by = append(by, fmt.Sprintf("%.0f", 100*f))
		}
		fmt.Fprintf(stdout, "toy train: held out, %d blocks: proposals matching the target by position %s %%; a greedy verification accepts %.2f of %d a block\n",
			ev.Blocks, strings.Join(by, " "), ev.Accepted, cfg.Gamma-1)
	}
	if ctx.Err() != nil {
		return &cli.InterruptedError{Err: errors.New("interrupted: the drafter trained so far is saved")}
	}
	return nil
}
