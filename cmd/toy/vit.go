package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// runTrainViT is toy train-vit: a ViT classifier from scratch on an ImageFolder, MNIST's IDX
// files or generated shapes.
func runTrainViT(args []string, stdout, stderr io.Writer) error {
	v := recipes.DefaultViT()
	fs := flag.NewFlagSet("train-vit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "vit-mnist", "model shape: "+strings.Join(config.VitPresetNames(), ", ")+"; the model flags override it")
	mf := config.NewVitFlags(fs, v.Model)
	fs.StringVar(&v.Images, "data", "", "an ImageFolder directory (one subfolder of PNG/JPEG images per class), or an IDX images file (with -labels)")
	fs.StringVar(&v.Labels, "labels", "", "the IDX labels file of -data's IDX images")
	fs.IntVar(&v.Shapes, "shapes", 0, "without -data: train on this many generated shapes (square, cross, circle)")
	fs.IntVar(&v.Held, "held", v.Held, "images held out for the accuracy")
	fs.IntVar(&v.Steps, "steps", v.Steps, "optimizer steps")
	fs.IntVar(&v.Batch, "batch", v.Batch, "images per step")
	fs.Float64Var(&v.LR, "lr", v.LR, "peak learning rate (cosine schedule)")
	fs.Float64Var(&v.MinLR, "min-lr", v.MinLR, "final learning rate")
	fs.IntVar(&v.Warmup, "warmup", v.Warmup, "linear warmup steps")
	fs.Float64Var(&v.WeightDecay, "weight-decay", v.WeightDecay, "AdamW's decoupled weight decay on matrices")
	fs.IntVar(&v.EvalEvery, "eval-every", v.EvalEvery, "held-out evaluation every this many steps")
	seed := fs.Uint64("seed", v.Seed, "data order and split seed (the weights' seed is the model's)")
	fs.StringVar(&v.Dir, "runs", "runs", "the runs directory")
	fs.IntVar(&v.Threads, "threads", 0, "CPU threads (0: 1, fastest for small models)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := config.VitPreset(*preset)
	if err != nil {
		return err
	}
	if err := mf.Apply(&m); err != nil {
		return err
	}
	v.Model, v.Seed, v.Out = m, *seed, stdout
	if v.Shapes > 0 && v.Images == "" && !flagSet(fs, "classes") {
		v.Model.Classes = len(data.ShapeNames)
	}
	if v.Warmup >= v.Steps {
		v.Warmup = v.Steps / 10
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err = v.Run(ctx)
	return err
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runClassify is toy classify: the top-k classes of each image under a ViT checkpoint.
func runClassify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("m", "", "the ViT checkpoint (GGUF, toy train-vit's weights/model.gguf)")
	k := fs.Int("k", 5, "classes to show per image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || fs.NArg() == 0 {
		return fmt.Errorf("usage: toy classify -m MODEL.gguf IMAGE...")
	}
	be, err := ggml.NewCPUBackend(1)
	if err != nil {
		return err
	}
	defer be.Close()
	m, values, err := llama.Load(*model, be)
	if err != nil {
		return err
	}
	defer m.Close()
	if m.ViT == nil {
		return fmt.Errorf("%s: a %s model, not an image classifier", *model, m.Arch.Name)
	}
	names, _ := values[recipes.ClassNamesKey].([]string)
	o := data.ImageOptions{Size: m.ViT.ImageSize, Channels: m.ViT.Channels}
	var images [][]float32
	for _, path := range fs.Args() {
		px, err := data.LoadImage(path, o)
		if err != nil {
			return err
		}
		images = append(images, px)
	}
	ev, err := llama.NewClassifierEvaluator(m, 1)
	if err != nil {
		return err
	}
	defer ev.Close()
	logits, err := ev.ClassLogits(images)
	if err != nil {
		return err
	}
	for i, row := range logits {
		p := llama.Softmax(row)
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
