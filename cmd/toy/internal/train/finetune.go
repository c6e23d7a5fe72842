package train

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/generated/config"
)

// RunFinetune is toy finetune: a GGUF model adapted to text or chat data (LoRA on a frozen
// base, a full fine-tune, or a warm start).
func RunFinetune(args []string, stdout, stderr io.Writer) error {
	// The flags' defaults are the mode's (LoRA, -full or -warm-start): a first parse, silent,
	// finds the mode the command line chooses; the second, with that mode's defaults, is the
	// command's, which reports errors and prints the help (-full -h shows -full's defaults). Where
	// the first stops at an error or -h, the flags before it choose.
	probe := recipes.DefaultFinetune()
	pc := newFinetuneFlags(&probe)
	_ = pc.parseSilently(args)
	f := finetuneDefaults(*pc.full, *pc.warm)
	c := newFinetuneFlags(&f)
	fs := c.fs
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.FinetuneCounts.Check(fs); err != nil {
		return err
	}
	if err := cli.CheckTemplateName(f.Template); err != nil {
		return err
	}
	set := cli.SetFlags(fs)
	if f.Resume == "" {
		if err := finetuneMode(&f, set, *c.full, *c.warm, *c.preset, c.model); err != nil {
			return err
		}
	}
	if f.Mode == recipes.ModeLoRA {
		f.LoRA.Alpha = float32(*c.alpha)
		f.LoRA.Targets = strings.Split(*c.targets, ",")
	}
	if f.Resume != "" {
		keep, newTotal, err := resumeFlags(set, stdout)
		if err != nil {
			return err
		}
		f.ResumeKeep = keep
		if newTotal {
			f.ResumeSteps = f.Steps
		}
	} else {
		if f.Base == "" || f.Data == "" {
			return cli.Usagef("give the base model (-m) and the data (-data)")
		}
		if !set["warmup"] && f.Warmup >= f.Steps {
			f.Warmup = f.Steps / 10
		}
	}
	f.Out = stdout
	f.KernelGate = cli.TrainGate(stderr, "finetune", *c.allowUnresolved)
	if fh, ok := stdout.(*os.File); ok {
		if fi, err := fh.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			f.Interactive = true
		}
	}
	job, err := joinJob()
	if err != nil {
		return err
	}
	if job != nil {
		f.Replicas = job.replicas
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := f.Run(ctx)
	if err == nil && res.Interrupted {
		err = &cli.InterruptedError{Err: fmt.Errorf("interrupted at step %d; the checkpoint is saved (toy finetune -resume %s)", res.Steps, res.RunDir)}
	}
	return leaveJob(job, "finetune", err)
}

// finetuneFlags are toy finetune's flags, bound to a Finetune whose values are their defaults,
// with those that are no field of it.
type finetuneFlags struct {
	fs                          *flag.FlagSet
	alpha                       *float64
	targets, preset             *string
	allowUnresolved, full, warm *bool
	model                       *config.LlamaFlags
}

// finetuneDefaults is the Finetune of the mode the flags choose, whose values are the flags'
// defaults: DefaultFullFinetune for -full, DefaultWarmStart for -warm-start, DefaultFinetune
// (LoRA) otherwise (both given is refused after parsing, by finetuneMode).
func finetuneDefaults(full, warm bool) recipes.Finetune {
	switch {
	case full && !warm:
		return recipes.DefaultFullFinetune()
	case warm && !full:
		return recipes.DefaultWarmStart()
	}
	return recipes.DefaultFinetune()
}

// modeDefaults lists the defaults of the flags whose defaults a mode sets (d: the mode's
// Finetune), for the mode flag's help: -lr, -min-lr, -warmup and -weight-decay.
func modeDefaults(d recipes.Finetune) string {
	return fmt.Sprintf("-lr %g -min-lr %g -warmup %d -weight-decay %g", d.LR, d.MinLR, d.Warmup, d.AdamW.WeightDecay)
}

// parseSilently parses args with no output (help and errors included), to read what they choose.
func (c *finetuneFlags) parseSilently(args []string) error {
	c.fs.SetOutput(io.Discard)
	return c.fs.Parse(args)
}

// newFinetuneFlags defines toy finetune's flags on a new flag set, bound to f, with f's values as
// their defaults.
func newFinetuneFlags(f *recipes.Finetune) *finetuneFlags {
	fs := flag.NewFlagSet("finetune", flag.ContinueOnError)
	c := &finetuneFlags{fs: fs}
	fs.StringVar(&f.Base, "m", "", "the base GGUF model to adapt (required; its tokenizer and chat template are used)")
	fs.StringVar(&f.Data, "data", "", "training data: a text file or directory, or chat conversations in a .jsonl file or a directory of them (required)")
	fs.StringVar(&f.Template, "template", "", cli.TemplateUsage(" for .jsonl data", "the base's"))
	fs.Int64Var(&f.MaxTextBytes, "max-text-bytes", 0, "read at most this much text (0: all)")
	fs.IntVar(&f.LoRA.Rank, "r", f.LoRA.Rank, "LoRA rank")
	c.alpha = fs.Float64("alpha", float64(f.LoRA.Alpha), "LoRA alpha (the updates are scaled by alpha/r)")
	c.targets = fs.String("lora-targets", strings.Join(f.LoRA.Targets, ","), "adapted projections: a comma-separated subset of "+strings.Join(training.LoRATargets, ", ")+", or all")
	fs.Uint64Var(&f.LoRA.Seed, "lora-seed", f.LoRA.Seed, "seed of the adapters' initial A matrices")
	fs.IntVar(&f.Recompute, "recompute", 0, "LoRA: recompute the first N blocks in the backward pass instead of keeping their activations (less memory, one more forward pass of them a step)")
	fs.BoolVar(&f.RecomputeAttention, "recompute-attention", false, "LoRA: recompute the other blocks' attention probabilities in the backward pass instead of keeping them (T·T·heads floats a block less, one more query-key product and softmax a block)")
	fs.BoolVar(&f.KeepTransposed, "keep-transposed", false, "LoRA on a block-quantized base: keep a transposed f32 copy of each weight for the backward pass (4 bytes a parameter) instead of dequantizing and transposing it every step, where a copy is needed (a GPU; on a CPU with toy's vector kernels the backward pass reads the weights transposed in place, and no base needs a copy)")
	f.Training.RegisterFlags(fs)
	f.Sequences.RegisterFlags(fs)
	f.Compute.RegisterFlags(fs)
	fs.Float64Var(&f.AdamW.WeightDecay, "weight-decay", f.AdamW.WeightDecay, "AdamW weight decay")
	fs.StringVar(&f.Resume, "resume", "", "continue the run in this directory from its checkpoint, with its own options; -steps may set a new total, and "+resumeFlagList(fs)+" may change")
	c.allowUnresolved = cli.RegisterGate(fs)
	c.full = fs.Bool("full", false, "full fine-tune: train every weight of an f32 copy of the base (defaults: "+modeDefaults(recipes.DefaultFullFinetune())+")")
	c.warm = fs.Bool("warm-start", false, "warm start: train a new model of -preset's shape with the vocabulary, tokenizer and token embeddings of -m (defaults as toy train's: "+modeDefaults(recipes.DefaultWarmStart())+")")
	fs.BoolVar(&f.FreezeEmbeddings, "freeze-embeddings", false, "-full, -warm-start: keep the token embeddings (and a tied output projection) fixed")
	fs.IntVar(&f.FreezeEmbeddingsSteps, "freeze-embeddings-steps", 0, "-full, -warm-start: keep the token embeddings fixed for the first N steps only (their AdamW moments follow the gradients meanwhile)")
	c.preset = fs.String("preset", cli.DefaultPreset, "-warm-start: the new model's shape: "+strings.Join(config.LlamaPresetNames(), ", ")+
		"; the model's flags (-d-model, -n-layers, -context, …) override it; its vocabulary is the donor's")
	demo, _ := config.LlamaPreset(cli.DefaultPreset)
	c.model = config.NewLlamaFlags(fs, demo)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy finetune -m BASE.gguf -data FILE|DIR [flags]

Adapts a GGUF model (any the decoder runs and the trainer can differentiate: llama/SmolLM2,
qwen2, qwen3) to new data.

Modes:
  LoRA (the default)  trains low-rank adapters (-r, -alpha, -lora-targets) on a frozen base,
                      which stays memory-mapped in its own type (f32, f16, q8_0, q4_K, ...);
                      only the adapters and their AdamW state are trained (train.LoRA()'s
                      settings). The result is an adapter GGUF in llama.cpp's LoRA format:
                      toy generate -m BASE -lora ADAPTER runs it, llama.cpp's --lora loads it,
                      toy export -m BASE -lora ADAPTER -o OUT.gguf merges it.
                      -recompute N recomputes the first N blocks in the backward pass
                      instead of keeping their activations: less memory, slower steps;
                      -recompute-attention recomputes the other blocks' attention
                      probabilities (the largest activation at long contexts) likewise.
  -full               trains every weight of the base: its weights, whatever their type, are
                      dequantized to an f32 copy (4 bytes a parameter, plus 8 for AdamW's
                      moments); -freeze-embeddings keeps the token embeddings fixed. The
                      result, weights/model.gguf (f32), keeps the base's architecture,
                      tokenizer and general.* metadata: toy generate -m weights/model.gguf
                      runs it where the base ran.
  -warm-start         trains a new model of the shape -preset and the model flags give (as
                      toy train's) from scratch, but for its vocabulary, tokenizer and token
                      embeddings, which come from -m (the donor); the donor's embedding width
                      must be the new -d-model. -freeze-embeddings keeps the transplanted
                      embeddings fixed for the whole run, -freeze-embeddings-steps N for the
                      first N steps.

Data: a text file or a directory of text files (as toy train reads them; documents are
separated by the end-of-text token), or a .jsonl file of chat conversations, one a line,
or a directory of .jsonl files (read in lexical order; mixed with other files, refused):
  {"messages":[{"role":"system|user|assistant","content":"..."}]}
rendered through the model's chat template; the loss counts the assistant's replies only
(through the end-of-turn marker). A bad line is an error naming it. Every 20th conversation
(or document, by hash) is held out for evaluation.

Each run writes runs/<id>/: events.jsonl (the run_start records the base model's path,
sha256 and architecture, the mode and its settings), the tokenized data, and checkpoints in
weights/ (step-<N>/adapter.gguf, or model.gguf with -full and -warm-start, and
optimizer.gguf; weights/adapter.gguf or weights/model.gguf is the latest).
Ctrl-C saves a checkpoint and exits (status 130); -resume runs/<id> continues it bit for bit.

Under Open MPI's mpirun (mpirun -np N toy finetune ...) it trains data-parallel: -batch is the
global batch, each rank trains batch/N sequences of it, and rank 0 writes the run
(docs/DISTRIBUTED.md).

Flags:
`)
		fs.PrintDefaults()
	}
	return c
}

// finetuneMode checks the flags against the mode they choose, refusing flags of another mode,
// and sets the mode and a warm start's new model (-preset and the model flags) on f, which holds
// the mode's defaults already (finetuneDefaults: the flags' defaults).
func finetuneMode(f *recipes.Finetune, set map[string]bool, full, warm bool, preset string, model *config.LlamaFlags) error {
	var modelFlags []string
	for name := range set {
		if isLlamaFlag(name) {
			modelFlags = append(modelFlags, "-"+name)
		}
	}
	slices.Sort(modelFlags)
	var loraFlags []string
	for _, name := range []string{"r", "alpha", "lora-targets", "lora-seed", "recompute", "recompute-attention", "keep-transposed"} {
		if set[name] {
			loraFlags = append(loraFlags, "-"+name)
		}
	}
	var d recipes.Finetune // the mode's Mode and NewModel
	switch {
	case full && warm:
		return cli.Usagef("-full and -warm-start exclude each other: choose one mode")
	case (full || warm) && len(loraFlags) > 0:
		return cli.Usagef("%s: LoRA flags, but the mode is %s", strings.Join(loraFlags, ", "), map[bool]string{true: "-full", false: "-warm-start"}[full])
	case !warm && (set["preset"] || len(modelFlags) > 0):
		return cli.Usagef("%s: the new model's shape is for -warm-start only", strings.Join(append(map[bool][]string{true: {"-preset"}}[set["preset"]], modelFlags...), ", "))
	case !full && !warm && (set["freeze-embeddings"] || set["freeze-embeddings-steps"]):
		return cli.Usagef("-freeze-embeddings and -freeze-embeddings-steps are for -full and -warm-start (LoRA trains no embeddings)")
	case full:
		d = recipes.DefaultFullFinetune()
	case warm:
		if set["vocab"] {
			return cli.Usagef("-vocab: a warm-started model's vocabulary is the donor's")
		}
		c, err := config.LlamaPreset(preset)
		if err != nil {
			return cli.AsUsage(err)
		}
		if err := model.Apply(&c); err != nil {
			return cli.AsUsage(fmt.Errorf("model: %w", err))
		}
		if f.Seed > math.MaxUint32 {
			return cli.Usagef("-seed %d: want at most %d (checkpoints keep it as a uint32)", f.Seed, uint32(math.MaxUint32))
		}
		c.Seed = int(f.Seed) // -seed seeds the initial weights as well as the batch order
		d = recipes.DefaultWarmStart()
		d.NewModel = &c
		if !set["seq"] && f.SeqLen > c.Context {
			f.SeqLen = c.Context
		}
	default:
		d = recipes.DefaultFinetune()
	}
	f.Mode, f.NewModel = d.Mode, d.NewModel
	if f.Mode == "" {
		f.Mode = recipes.ModeLoRA
	}
	return nil
}

// isLlamaFlag reports whether a flag is one of config.NewLlamaFlags's.
func isLlamaFlag(name string) bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	config.NewLlamaFlags(fs, config.DefaultLlama())
	return fs.Lookup(name) != nil
}
