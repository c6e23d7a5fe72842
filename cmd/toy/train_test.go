package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/ggml"
)

// TestTrainSeed: two runs of toy train with the same -seed write the same checkpoint, bit for
// bit, and record the seed; with another -seed every random weight differs. The model flags
// reach the checkpoint's shape.
func TestTrainSeed(t *testing.T) {
	text := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "go", "x", "y"}
	for f := 0; f < 20; f++ {
		var b bytes.Buffer
		for l := 0; l < 40; l++ {
			fmt.Fprintf(&b, "%s %s := %d\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100))
		}
		require.NoError(t, os.WriteFile(filepath.Join(text, fmt.Sprintf("f%02d.txt", f)), b.Bytes(), 0o644))
	}
	train := func(seed string) map[string][]byte {
		runsDir := t.TempDir()
		_, errOut, code := runToy("train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-d-model", "48", "-n-heads", "4",
			"-seq", "16", "-batch", "2", "-steps", "1", "-eval-batches", "1", "-sample", "0",
			"-text", text, "-runs", runsDir, "-seed", seed)
		require.Equal(t, 0, code, errOut)
		model, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "model.gguf"))
		require.NoError(t, err)
		require.Len(t, model, 1)
		f, err := ggml.OpenGGUF(model[0])
		require.NoError(t, err)
		defer f.Close()
		v, err := f.Value("toy.llama.seed")
		require.NoError(t, err)
		assert.EqualValues(t, seed, fmt.Sprint(v), "the checkpoint records the weights' seed")
		d, err := f.Value("llama.embedding_length")
		require.NoError(t, err)
		assert.EqualValues(t, 48, d, "-d-model reaches the model")
		out := map[string][]byte{}
		for _, ti := range f.Tensors() {
			out[ti.Name], err = f.ReadTensorData(ti.Name)
			require.NoError(t, err)
		}
		return out
	}
	a, b, c := train("5"), train("5"), train("6")
	require.NotEmpty(t, a)
	assert.Equal(t, a, b, "the same seed reproduces the run")
	for name := range a {
		assert.NotEqual(t, a[name], c[name], "%s: another seed gives other weights", name)
	}
}
