package oracle

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/llamacpp"
	"github.com/toyml/toy/ggml"
)

// TestProductDoesNotLinkLlamaCpp: the oracle is for tests and benchmarks; cmd/toy must not
// depend on it, its bindings or llama.cpp.
func TestProductDoesNotLinkLlamaCpp(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-deps", "github.com/toyml/toy/cmd/toy")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/toyml/toy/engines/transformer", "the listing is cmd/toy's dependencies")
	for _, d := range deps {
		for _, banned := range []string{"llama/llama.cpp", "generated/llamacpp", "internal/oracle"} {
			assert.NotContains(t, d, banned, "cmd/toy depends on %s", d)
		}
	}
}

// TestCheckLinked compares the spec's enum names with the linked llama.cpp's.
func TestCheckLinked(t *testing.T) {
	require.NoError(t, llamacpp.CheckLinked())
}

// tinyModel writes a small llama checkpoint with toy's trainer, with the dummy vocabulary
// llama.cpp needs to load a model without a tokenizer.
func tinyModel(t *testing.T) (string, config.Llama) {
	c := config.DefaultLlama()
	c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context = 32, 32, 48, 2, 1, 1, 16
	require.NoError(t, transformer.Validate(c))
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, m.Save(path, []transformer.KV{{Key: "tokenizer.ggml.model", Value: "none"}}))
	return path, c
}

// TestOpenRefuses: what llama.cpp cannot load is an error, never an abort or a hang.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing.gguf"), Options{})
	assert.ErrorContains(t, err, "missing.gguf")
	_, err = Open(dir, Options{})
	assert.ErrorContains(t, err, "not a regular file")
	junk := filepath.Join(dir, "junk.gguf")
	require.NoError(t, os.WriteFile(junk, []byte("GGUF but not really"), 0o644))
	_, err = Open(junk, Options{})
	assert.ErrorContains(t, err, "cannot load")
	_, err = Open(junk, Options{Context: -1})
	assert.ErrorContains(t, err, "out of range")
}

// TestLogitsChecksInputs: token ids, lengths and the model's state are checked before C sees
// them; a second call starts from an empty cache and repeats the first.
func TestLogitsChecksInputs(t *testing.T) {
	path, c := tinyModel(t)
	m, err := Open(path, Options{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, c.Vocab, m.NVocab())
	assert.Equal(t, c.Context, m.Context(), "the training context, below the default 512")
	assert.Equal(t, "NONE", m.VocabType())

	seq := []int32{1, 5, 7, 2}
	first, err := m.Logits(seq)
	require.NoError(t, err)
	require.Len(t, first, len(seq))
	require.Len(t, first[0], c.Vocab)
	again, err := m.Logits(seq)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	prefix, err := m.Logits(seq[:2])
	require.NoError(t, err)
	assert.InDeltaSlice(t, first[1], prefix[1], 1e-5, "causal: a prefix's logits do not depend on what follows")

	for _, bad := range [][]int32{nil, {1, int32(c.Vocab)}, {-1}, make([]int32, c.Context+1)} {
		_, err := m.Logits(bad)
		assert.Error(t, err, "%v", bad)
	}
	_, err = m.Piece(int32(c.Vocab), false)
	assert.ErrorContains(t, err, "out of range")

	assert.ErrorContains(t, m.SetLoRA(path, 1), "cannot load the adapter", "a model is not an adapter")

	require.NoError(t, m.Close())
	require.NoError(t, m.Close())
	_, err = m.Logits(seq)
	assert.ErrorIs(t, err, errClosed)
}

// TestEvalAppends: Eval appends to the cache, so a prompt and then one token at a time give
// the logits Logits gives at those positions; it refuses what does not fit, and Reset starts
// over. With an f16 cache the logits stay close to the f32 cache's.
func TestEvalAppends(t *testing.T) {
	path, c := tinyModel(t)
	seq := []int32{1, 5, 7, 2, 9, 3}
	for _, f16 := range []bool{false, true} {
		m, err := Open(path, Options{Threads: 1, KVF16: f16})
		require.NoError(t, err)
		defer m.Close()
		all, err := m.Logits(seq)
		require.NoError(t, err)
		require.NoError(t, m.Reset())
		tol := 1e-5
		if f16 {
			tol = 1e-2
		}
		for round := 0; round < 2; round++ {
			last, err := m.Eval(seq[:3])
			require.NoError(t, err)
			assert.InDeltaSlice(t, all[2], last, tol, "the prompt's last logits")
			for i := 3; i < len(seq); i++ {
				last, err = m.Eval(seq[i : i+1])
				require.NoError(t, err)
				assert.InDeltaSlice(t, all[i], last, tol, "position %d", i)
			}
			_, err = m.Eval(make([]int32, c.Context-len(seq)+1))
			assert.ErrorContains(t, err, "room", "past the context")
			_, err = m.Eval([]int32{int32(c.Vocab)})
			assert.ErrorContains(t, err, "out of range")
			require.NoError(t, m.Reset())
		}
	}
}
