package train

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
)

// Run is toy train: a language model trained from scratch (recipes.Scratch), or, by -arch
// vit, an image classifier (RunViT) and, by -recipe dflash, a DFlash drafter.
func Run(args []string, stdout, stderr io.Writer) error {
	switch r := scanFlags(args, "recipe")["recipe"]; r {
	case "", "scratch":
	case "dflash":
		return runTrainDFlash(args, stdout, stderr)
	default:
		return cli.Usagef("-recipe %q: want scratch (the default) or dflash", r)
	}
	s := recipes.DefaultScratch()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.String("recipe", "scratch", "what to train: scratch (a model from scratch), or dflash (a DFlash drafter for -target; toy train -recipe dflash -h)")
	// The model family is chosen from the command line before the flags are defined, so that
	// the model's flags are the family's own, generated from its spec (the two specs share
	// names such as -d-model with other meanings and bounds).
	family, chosen, err := trainFamily(args)
	if err != nil {
		return err
	}
	fam := cli.FamilyNamed(family)
	if fam.ModelFlags == nil { // an image classifier: its own data and flags
		return RunViT(args, stdout, stderr)
	}
	preset := fs.String("preset", chosen, "model shape: "+strings.Join(config.LlamaPresetNames(), ", ")+" (llama); "+
		strings.Join(config.Gpt2PresetNames(), ", ")+" (gpt2). The preset picks the family; the family's model flags override it, their defaults shown here are the preset's (toy train -preset gpt2-demo -h lists gpt2's)")
	arch := fs.String("arch", family, "model family: llama or gpt2 (or vit, an image classifier with flags of its own); it follows -preset, and -arch gpt2 alone trains "+cli.DefaultGPT2Preset)
	applyModel := fam.ModelFlags(fs, &s, chosen, preset)
	fs.StringVar(&s.Text, "text", "", "a text file or directory to train on (default: the Go standard library's source)")
	fs.StringVar(&s.Corpus, "corpus", "", "a token corpus made by toy tokenize (needs -tokenizer)")
	fs.StringVar(&s.Tokenizer, "tokenizer", "", "a GGUF file holding the tokenizer (a checkpoint or toy tokenizer train output)")
	fs.StringVar(&s.Teacher, "teacher", "", "distil this GGUF model: train on its greedy continuations (token ids, its tokenizer) of -generated openings of the text; makes a draft model for toy generate -draft")
	fs.IntVar(&s.Generated, "generated", 0, "with -teacher: the sequences of -seq tokens it generates for training (a twentieth as many more are held out)")
	fs.Int64Var(&s.MaxTextBytes, "max-text-bytes", s.MaxTextBytes, "read at most this much text (0: all)")
	s.Training.RegisterFlags(fs)
	tokens := fs.Int64("tokens", 0, "train on about this many tokens instead of -steps (steps = tokens / (batch × seq), at least 1; not with -steps)")
	s.Sequences.RegisterFlags(fs)
	s.Compute.RegisterFlags(fs)
	fs.Float64Var(&s.AdamW.WeightDecay, "weight-decay", s.AdamW.WeightDecay, "AdamW weight decay (matrices only)")
	fs.StringVar(&s.Resume, "resume", "", "continue the run in this directory (runs/<id>) from its checkpoint, with its own options; -steps may set a new total, and "+resumeFlagList(nil)+" may change; any other flag is refused")
	allowUnresolved := cli.RegisterGate(fs)
	s.FinalSample.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy train [flags]

Trains a LLaMA/SmolLM2-shaped or a GPT-2 model from scratch and saves it as a GGUF checkpoint
that llama.cpp and ollama can load. With no flags it trains the demo model on the Go standard
library's source for about a minute on two cores, then prints a greedy sample.
-preset gpt2-demo (or -arch gpt2) trains a GPT-2 model of the same size, -preset gpt2-small
GPT-2 small (124M); the model flags listed are those of the chosen family. -arch vit (or
-preset vit-mnist, vit-tiny) trains a ViT image classifier instead: toy train -arch vit -h lists
its flags.

Each run writes runs/<id>/: events.jsonl (schema toy/v1), train.tok and heldout.tok (the
tokenized data), and checkpoints in weights/ (step-<N>/model.gguf and optimizer.gguf, named by
weights/checkpoint.json; weights/model.gguf is the latest model). Checkpoints are saved every
-save-every steps and -save-minutes minutes; Ctrl-C saves one and exits (status 130);
-resume runs/<id> continues it bit for bit, after Ctrl-C or a crash.

-teacher T.gguf -generated N distils a model: the data becomes T's greedy continuations of N
openings of the text, in T's token ids and tokenizer. A small model distilled so is a draft
for speculative decoding with T (toy generate -m T -draft runs/<id>/weights/model.gguf).

Under Open MPI's mpirun (mpirun -np N toy train ...) it trains data-parallel: -batch is the
global batch, each rank trains batch/N sequences of it, and rank 0 writes the run
(docs/DISTRIBUTED.md).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.TrainCounts.Check(fs); err != nil {
		return err
	}
	if *arch != family || cli.PresetFamily(*preset) != "" && cli.PresetFamily(*preset) != family {
		// Only a command line the scan reads otherwise than the flag package gets here.
		return cli.Usagef("-arch %s and -preset %s: give each once, as its own flag", *arch, *preset)
	}
	if err := applyModel(); err != nil {
		return err
	}
	// -seed seeds the initial weights (the model's Seed) as well as the batch order.
	if s.Seed > math.MaxUint32 {
		return cli.Usagef("-seed %d: want at most %d (checkpoints keep it as a uint32)", s.Seed, uint32(math.MaxUint32))
	}
	s.SetSeed(int(s.Seed))
	set := cli.SetFlags(fs)
	if s.Resume != "" {
		keep, newTotal, err := resumeFlags(set, stdout)
		if err != nil {
			return err
		}
		s.ResumeKeep = keep
		if newTotal {
			s.ResumeSteps = s.Steps
		}
	}
	// Defaults the user did not set follow the shape and length they chose; what they set
	// explicitly is checked as given.
	if ctxLen := s.Context(); !set["seq"] && s.SeqLen > ctxLen {
		s.SeqLen = ctxLen
	}
	if set["tokens"] { // cli.TrainCounts refused a -tokens below 1
		switch {
		case set["steps"]:
			return cli.Usagef("-tokens %d and -steps %d both set the length of the run: give one of them", *tokens, s.Steps)
		case s.Batch < 1 || s.SeqLen < 1:
			// the options' check names them
		default:
			s.Steps = int(max(1, *tokens/int64(s.Batch*s.SeqLen)))
		}
	}
	if !set["warmup"] && s.Warmup >= s.Steps {
		s.Warmup = s.Steps / 10
	}
	// The training graphs' lookups of toy's CPU operations are audited once the recipe has
	// built the model (ggml's optimizer steps it, not toy's adamw_f32).
	s.KernelGate = cli.TrainGate(stderr, "train", *allowUnresolved)
	s.Out, s.Interactive = stdout, isTerminal(stdout)
	job, err := joinJob()
	if err != nil {
		return err
	}
	if job != nil {
		s.Replicas = job.replicas
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := s.Run(ctx) // an interrupted run has saved its checkpoint and says how to resume
	if err == nil && res.Interrupted {
		err = &cli.InterruptedError{Err: fmt.Errorf("interrupted at step %d; the checkpoint is saved (toy train -resume %s)", res.Steps, res.RunDir)}
	} else if errors.Is(err, context.Canceled) { // before the run began (training its tokenizer)
		err = &cli.InterruptedError{Err: fmt.Errorf("interrupted before training began: nothing was written")}
	}
	return leaveJob(job, "train", err)
}

// scanFlags reads the values of the named string flags from a command line as the flag package
// will (-name v, -name=v, one or two dashes, the last one wins, up to "--"), before the flags
// are defined.
func scanFlags(args []string, names ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !slices.Contains(names, name) {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				continue // the flag package reports the missing value
			}
			i++
			value = args[i]
		}
		out[name] = value
	}
	return out
}

// trainFamily picks the model family and preset of a toy train command line from its -arch
// and -preset (read as the flag package will: -name v, -name=v, one or two dashes, the last
// one wins, up to "--"): the preset's family, or -arch's default preset, or the llama demo.
//
// A command line with neither that resumes a run (-resume DIR) takes the run's family when it
// is vit (a language model's run finds its family in its checkpoint).
func trainFamily(args []string) (family, preset string, err error) {
	v := scanFlags(args, "arch", "preset", "resume")
	arch, preset := v["arch"], v["preset"]
	if arch == "" && preset == "" && v["resume"] != "" && isViTRun(v["resume"]) {
		arch = transformer.ViTArch
	}
	pf := cli.PresetFamily(preset)
	switch {
	case arch == "":
		family = cmp.Or(pf, transformer.Arch)
	case cli.FamilyNamed(arch) != nil:
		family = arch
		if pf != "" && pf != arch {
			return "", "", cli.Usagef("-preset %s is a %s preset, not %s (%s presets: %s)", preset, pf, arch, arch, strings.Join(cli.FamilyNamed(arch).Presets(), ", "))
		}
	default:
		return "", "", cli.Usagef("-arch %q: want %s", arch, cli.FamilyNames())
	}
	if preset == "" {
		preset = cli.FamilyNamed(family).DefaultPreset
	}
	return family, preset, nil
}

// isViTRun reports whether the run in dir trained a ViT classifier (its first run_start's
// model{} is a ViT configuration); an unreadable run is left for the recipe to report.
func isViTRun(dir string) bool {
	events, err := runs.ReadEvents(filepath.Join(dir, runs.EventsFile))
	if err != nil {
		return false
	}
	for _, e := range events {
		if rs, ok := e.Data.(runs.RunStart); ok {
			raw, _ := rs.Model.(json.RawMessage)
			var m map[string]json.RawMessage
			_ = json.Unmarshal(raw, &m)
			_, vit := m["patch_size"]
			return vit
		}
	}
	return false
}
