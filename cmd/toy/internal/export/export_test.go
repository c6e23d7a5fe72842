package export

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// TestExportFileTypes: toy export -type Q4_K_M writes llama-quantize's mix for a 2-layer
// SmolLM2-shaped model (the last layer's attn_v and ffn_down get q6_K, the first's q4_K; the
// 576-value rows fall back, q4_K to q5_0 and q6_K to q8_0, and the tied head is q8_0) with
// general.file_type 15, and reports what it converted; a q8_0
// file is requantized only with -allow-requantize; the type is not taken positionally.
func TestExportFileTypes(t *testing.T) {
	dir := t.TempDir()
	a := transformer.SmolLM2Architecture()
	a.NLayers, a.Vocab, a.DFF, a.Context = 2, 128, 512, 64
	model := filepath.Join(dir, "smol.gguf")
	require.NoError(t, transformer.WriteRandomGGUF(model, a, ggml.F16, 1))

	q4 := filepath.Join(dir, "q4.gguf")
	out, errOut, code := runToy("export", "-m", model, "-o", q4, "-type", "q4_k_m", "-t", "2")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "weight matrices to Q4_K_M in "+q4)
	assert.Contains(t, errOut, "toy export: 15 of 20 tensors converted: 11 q5_0, 2 q8_0, 1 q4_K, 1 q6_K; 11 fell back from q4_K (rows its blocks do not divide, as in llama-quantize); 1 fell back from q6_K")
	f, err := ggml.OpenGGUF(q4)
	require.NoError(t, err)
	ft, err := f.Uint32("general.file_type")
	require.NoError(t, err)
	assert.Equal(t, uint32(decoding.FileTypeQ4_K_M), ft)
	for name, want := range map[string]ggml.Type{"token_embd.weight": ggml.Q8_0, "blk.0.attn_q.weight": ggml.Q5_0,
		"blk.0.attn_v.weight": ggml.Q5_0, "blk.1.attn_v.weight": ggml.Q8_0, "blk.0.ffn_down.weight": ggml.Q4_K,
		"blk.1.ffn_down.weight": ggml.Q6_K,
		"blk.0.ffn_up.weight":   ggml.Q5_0, "blk.0.attn_norm.weight": ggml.F32} {
		ti, ok := f.Tensor(name)
		require.True(t, ok, name)
		assert.Equal(t, ggml.TypeName(want), ggml.TypeName(ti.Type), name)
	}
	f.Close()

	q8 := filepath.Join(dir, "q8.gguf")
	_, errOut, code = runToy("export", "-m", model, "-o", q8, "-type", "Q8_0")
	require.Equal(t, 0, code, errOut)
	again := filepath.Join(dir, "again.gguf")
	_, errOut, code = runToy("export", "-m", q8, "-o", again, "-type", "Q4_K_M")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is q8_0 already: converting it to q5_0 would quantize it twice (toy export -allow-requantize does it anyway; or ask for the model's own file type (Q8_0))")
	assert.NoFileExists(t, again)
	_, errOut, code = runToy("export", "-m", q8, "-o", again)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is q8_0 already: converting it to f16 would make it bigger, not better", "the default F16 of a quantized model")
	_, errOut, code = runToy("export", "-m", q8, "-o", again, "-type", "Q4_K_M", "-allow-requantize")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("export", "-m", q8, "-o", filepath.Join(dir, "same.gguf"), "-type", "Q8_0")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "toy export: 0 of 20 tensors converted in", "a file type the model has already is a copy")

	_, errOut, code = runToy("export", "-m", model, "-o", filepath.Join(dir, "x.gguf"), "Q4_K_M")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unexpected argument "Q4_K_M": give the file type as -type Q4_K_M`)
}

// TestExportRefusesBadInput: an unknown type, a type toy does not write, a mix on a model none
// of whose rows a k-quant super-block divides, an output that is a directory: each is a clear
// error, and nothing is written.
func TestExportRefusesBadInput(t *testing.T) {
	model := clitest.TinyCheckpoint(t) // rows of 32 and 64
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-type", "q9_9"}, 2, `-type "q9_9": not a ggml type nor a file type llama-quantize names; choose one of F32, F16, Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q2_K, Q3_K_S`},
		{[]string{"-type", "iq2_xxs"}, 2, "toy export writes no iq2_xxs files: the IQ1, IQ2 and IQ3_XXS mixes need an importance matrix"}, {[]string{"-type", "q8_K"}, 2, "toy export writes no q8_K files: it is not a type llama-quantize writes files of"},
		{[]string{"-type", "Q4_K_M"}, 1, "Q4_K_M: no converted tensor has rows that split into q4_K's 256-value super-blocks, so none would be stored in a k-quant"},
		{[]string{"-type", "Q4_K_M", "-pure"}, 1, "has rows of 32 values, not a multiple of q4_K's block of 256 (a pure export has no fallback)"},
		{[]string{"-type", "Q8_0", "-t", "0"}, 2, "-t 0: give at least one thread"},
	} {
		_, errOut, code := runToy(append([]string{"export", "-m", model, "-o", out}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.msg, c.args)
		assert.NoFileExists(t, out)
	}
	require.NoError(t, os.Mkdir(out, 0o755))
	_, errOut, code := runToy("export", "-m", model, "-o", out, "-type", "Q8_0")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, out+" is a directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing but the directory")
}
