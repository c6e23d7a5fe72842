package recipes

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/ggml"
)

// TestSeedMakesTheRun: two runs with the same seed write the same checkpoint, bit for bit;
// a run with another seed starts from other weights. The checkpoint records the seed its
// weights were drawn with.
func TestSeedMakesTheRun(t *testing.T) {
	text := writeText(t)
	run := func(seed uint64) map[string][]byte {
		s := tinyScratch(t, text)
		s.Steps, s.Warmup, s.EvalEvery, s.SampleTokens, s.Seed = 2, 0, 0, 0, seed
		res, err := s.Run(context.Background())
		require.NoError(t, err)
		f, err := ggml.OpenGGUF(filepath.Join(res.RunDir, "weights", modelFile))
		require.NoError(t, err)
		defer f.Close()
		got, err := f.Value("toy.llama.seed")
		require.NoError(t, err)
		assert.EqualValues(t, seed, got, "the checkpoint records the weights' seed")
		out := map[string][]byte{}
		for _, ti := range f.Tensors() {
			out[ti.Name], err = f.ReadTensorData(ti.Name)
			require.NoError(t, err)
		}
		return out
	}
	a, b, c := run(5), run(5), run(6)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b, "the same seed reproduces the run")
	for name := range a {
		assert.NotEqual(t, a[name], c[name], "%s: another seed gives other weights", name)
	}
}
