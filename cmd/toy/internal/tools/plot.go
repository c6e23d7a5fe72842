package tools

import (
	"flag"
	"fmt"
	"image/png"
	"io"
	"path/filepath"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/plot"
	"github.com/toyml/toy/engines/recipes"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/ggml"
)

// RunPlot is toy plot: a run's loss curves drawn to a PNG (a classifier's with its accuracy,
// and its confusion matrix).
func RunPlot(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	out := fs.String("o", "", "output PNG (default: <run>/loss.png, which a new plot replaces)")
	confusionOut := fs.String("confusion", "", "a classifier run's confusion-matrix PNG (default: <run>/confusion.png, which a new plot replaces)")
	force := fs.Bool("force", false, "replace -o and -confusion when they exist (only ever a PNG)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: toy plot [-o FILE.png] [-confusion FILE.png] runs/<id>

Draws the run's training and held-out loss curves to a PNG; for a classifier (a ViT run), the
held-out accuracy too, in a second chart below, and its last evaluation's confusion matrix to
a second PNG.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("name one run directory")
	}
	dir := fs.Arg(0)
	events, err := runs.ReadEvents(filepath.Join(dir, runs.EventsFile))
	if err != nil && len(events) == 0 {
		return err
	}
	train, held := plot.FromEvents(events)
	acc := plot.Accuracy(events)
	confusion, confusionStep, accuracy := plot.Confusion(events)
	replaceOwn, replaceOwnConfusion := *out == "", *confusionOut == ""
	if *out == "" {
		*out = filepath.Join(dir, "loss.png")
	}
	if *confusionOut == "" {
		*confusionOut = filepath.Join(dir, "confusion.png")
	}
	if err := cli.CheckOutput(*out, cli.KindPNG, *force, replaceOwn); err != nil {
		return err
	}
	if confusion != nil {
		if err := cli.CheckOutput(*confusionOut, cli.KindPNG, *force, replaceOwnConfusion); err != nil {
			return err
		}
	}
	img, err := plot.Render(train, held, plot.Options{Title: "loss of " + filepath.Base(dir)})
	if err != nil {
		return err
	}
	if len(acc) > 0 {
		accImg, err := plot.Render(nil, acc, plot.Options{Title: "held-out accuracy of " + filepath.Base(dir), YLabel: "accuracy (%)", Height: 360, LegendBottom: true})
		if err != nil {
			return err
		}
		img = plot.Stack(img, accImg)
	}
	if err := runs.AtomicWriteFile(*out, func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d training and %d held-out points: %s\n", len(train), len(held), *out)
	if confusion != nil {
		title := fmt.Sprintf("confusion matrix of %s: step %d, held-out accuracy %.2f%%", filepath.Base(dir), confusionStep, 100*accuracy)
		err := runs.AtomicWriteFile(*confusionOut, func(w io.Writer) error {
			return plot.ConfusionPNG(w, confusion, runClassNames(dir), title)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "confusion matrix of %d classes at step %d: %s\n", len(confusion), confusionStep, *confusionOut)
	}
	return nil
}

// runClassNames are the class names of a classifier run's latest checkpoint; nil when it has
// none (the plot then numbers the classes).
func runClassNames(dir string) []string {
	f, err := ggml.OpenGGUF(filepath.Join(dir, runs.WeightsDir, "model.gguf"))
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Strings(recipes.ClassNamesKey)
	return names
}
