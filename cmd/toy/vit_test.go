package main

import (
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/train"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/ggml"
)

// TestTrainViTAndClassify: toy train -arch vit (and its other spelling, toy train-vit) on an
// ImageFolder of shapes writes a checkpoint that toy classify reads, printing top-k class
// names with probabilities that are the training graph's: each image's cross entropy under
// the classifier trainer's forward (a step with a zero learning rate) is -log of the
// probability classify prints for its label. toy train -resume extends the finished ViT run
// (the family read from the run); toy plot draws its loss and accuracy and its confusion
// matrix; a bad image is named.
func TestTrainViTAndClassify(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, data.WriteShapesFolder(dir, 90, 16, 1))
	for _, spelling := range [][]string{{"train", "-arch", "vit"}, {"train-vit"}} {
		runsDir := t.TempDir()
		args := append(append(append([]string(nil), spelling...), "-data", dir, "-steps", "20", "-runs", runsDir), clitest.TinyViTFlags...)
		out, errOut, code := runToy(args...)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "held-out loss")
		assert.Contains(t, out, "accuracy")
		models, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "model.gguf"))
		require.NoError(t, err)
		require.Len(t, models, 1)
		if spelling[0] == "train-vit" {
			continue
		}

		out, errOut, code = runToy("train", "-resume", filepath.Dir(filepath.Dir(models[0])), "-steps", "25")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "at step 20 of 25")

		be, err := ggml.NewCPUBackend(1)
		require.NoError(t, err)
		defer be.Close()
		m, _, err := training.Load(models[0], be)
		require.NoError(t, err)
		defer m.Close()
		tr, err := training.NewClassifierTrainer(m, 1)
		require.NoError(t, err)
		defer tr.Close()
		zeroLR := [7]float32{0, 0.9, 0.999, 1e-8, 0, 1, 1}
		names := []string{"circle", "cross", "square"} // the ImageFolder's classes: its subfolders, sorted
		for i, name := range names {
			img := filepath.Join(dir, name, fmt.Sprintf("%04d.png", 3+slices.Index(data.ShapeNames, name))) // image n is shape n%3
			out, errOut, code = runToy("classify", "-m", models[0], "-k", "3", img)
			require.Equal(t, 0, code, errOut)
			line := strings.TrimSpace(out)
			require.True(t, strings.HasPrefix(line, img+":"), line)
			fields := strings.Fields(strings.TrimPrefix(line, img+":"))
			require.Len(t, fields, 6, "three classes with probabilities: %s", line)
			p := map[string]float64{}
			for j := 0; j < len(fields); j += 2 {
				p[fields[j]], err = strconv.ParseFloat(fields[j+1], 64)
				require.NoError(t, err)
			}
			require.Contains(t, p, name)

			px, err := data.LoadImage(img, data.ImageOptions{Size: 16, Channels: 1})
			require.NoError(t, err)
			b, err := train.NewClassificationBatch([][]float32{px}, []int32{int32(i)}, len(px), 3)
			require.NoError(t, err)
			loss, _, err := tr.StepImages(b, zeroLR, zeroLR)
			require.NoError(t, err)
			assert.InDelta(t, math.Exp(-float64(loss)), p[name], 6e-5, "%s: classify's probability is the training forward's", img)
		}
		runDir := filepath.Dir(filepath.Dir(models[0]))
		out, errOut, code = runToy("plot", runDir)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "confusion matrix of 3 classes at step 25")
		for file, minHeight := range map[string]int{"loss.png": 500 + 360, "confusion.png": 3 * 48} {
			f, err := os.Open(filepath.Join(runDir, file))
			require.NoError(t, err)
			cfg, err := png.DecodeConfig(f)
			f.Close()
			require.NoError(t, err, file)
			assert.GreaterOrEqual(t, cfg.Height, minHeight, "%s: the loss and accuracy charts, and the matrix", file)
		}

		_, errOut, code = runToy("classify", "-m", models[0], filepath.Join(dir, "missing.png"))
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errOut, "missing.png")
	}
	_, errOut, code := runToy("train-vit", "-arch", "gpt2")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "toy train-vit trains vit")
}
