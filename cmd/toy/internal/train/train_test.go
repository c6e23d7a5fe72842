package train

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/ggml"
)

// TestTrainSeed: two runs of toy train with the same -seed write the same checkpoint, bit for
// bit, and record the seed; with another -seed every random weight differs. The model flags
// reach the checkpoint's shape.
func TestTrainSeed(t *testing.T) {
	text := clitest.WriteCorpus(t, 3)
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

// TestTrainResumeFlags: with -resume, the flags that would change the run are refused (exit
// 2, naming them), those that do not are applied and listed, -steps extends the run, and a
// finished run says so. -preset tiny alone is refused naming -vocab.
func TestTrainResumeFlags(t *testing.T) {
	text := clitest.WriteCorpus(t, 3)
	runsDir := t.TempDir()
	_, errOut, code := runToy("train", "-preset", "tiny", "-steps", "3", "-text", text, "-runs", runsDir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "-vocab 257 or more")
	dirs, _ := filepath.Glob(filepath.Join(runsDir, "*"))
	assert.Empty(t, dirs, "a refused start writes nothing")

	_, errOut, code = runToy("train", "-preset", "tiny", "-vocab", "300", "-c", "16", "-seq", "16", "-batch", "2",
		"-steps", "3", "-warmup", "1", "-eval-batches", "1", "-sample", "0", "-text", text, "-runs", runsDir)
	require.Equal(t, 0, code, errOut)
	dirs, _ = filepath.Glob(filepath.Join(runsDir, "*"))
	require.Len(t, dirs, 1)
	_, errOut, code = runToy("train", "-resume", dirs[0], "-lr", "0.1", "-batch", "3", "-steps", "5")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-batch, -lr would change the run")
	_, errOut, code = runToy("train", "-resume", dirs[0])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the run is finished (3 of 3 steps)")
	out, errOut, code := runToy("train", "-resume", dirs[0], "-steps", "5", "-t", "1", "-sample", "4")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "resume: -sample, -steps, -t from the command line")
	assert.Contains(t, out, "sample (greedy)")
	_, errOut, code = runToy("train", "-resume", dirs[0])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the run is finished (5 of 5 steps)", "the extension is remembered")
}

// TestTrainGPT2: the preset (or -arch) picks the family, whose generated flags shape the model:
// a gpt2 run writes a gpt2 checkpoint with llama.cpp's gpt2 keys, and a preset of the other
// family, an unknown family or a flag the family lacks is a usage error.
func TestTrainGPT2(t *testing.T) {
	text := clitest.WriteCorpus(t, 3)
	for _, family := range [][]string{{"-preset", "gpt2-demo"}, {"-arch", "gpt2"}} {
		runsDir := t.TempDir()
		args := append([]string{"train"}, family...)
		out, errOut, code := runToy(append(args, "-vocab", "300", "-c", "16", "-d-model", "32", "-n-heads", "4", "-d-ff", "64",
			"-n-layers", "1", "-seq", "16", "-batch", "2", "-steps", "2", "-eval-batches", "1", "-sample", "0",
			"-text", text, "-runs", runsDir, "-seed", "9")...)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "model: custom gpt2")
		model, err := filepath.Glob(filepath.Join(runsDir, "*", "weights", "model.gguf"))
		require.NoError(t, err)
		require.Len(t, model, 1)
		f, err := ggml.OpenGGUF(model[0])
		require.NoError(t, err)
		for key, want := range map[string]any{"general.architecture": "gpt2", "gpt2.embedding_length": uint32(32),
			"gpt2.feed_forward_length": uint32(64), "gpt2.block_count": uint32(1), "toy.gpt2.seed": uint32(9)} {
			v, err := f.Value(key)
			require.NoError(t, err, key)
			assert.Equal(t, want, v, key)
		}
		f.Close()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "-arch", "gpt2", "-preset", "demo"}, "-preset demo is a llama preset, not gpt2"},
		{[]string{"train", "-arch", "bert"}, `-arch "bert": want llama, gpt2 or vit`},
		{[]string{"train", "-preset", "gpt2-demo", "-rope-base", "1e4"}, "flag provided but not defined: -rope-base"},
		{[]string{"train", "-preset=gpt2-small", "-layer-norm-eps", "-1"}, "layer_norm_eps -1 is below the minimum 0"},
	} {
		_, errOut, code := runToy(c.args...)
		assert.Equal(t, 2, code, c.args)
		assert.Contains(t, errOut, c.want, c.args)
	}
}
