package training

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestExportMergesWholeModel: Export with an adapter converts the whole model, as a plain
// conversion does: every tensor the adapter does not update has the conversion's type and
// bytes, and every one it updates has the conversion's type and the bytes of ggml's quantizer
// applied to a float64 merge of the base and scale·B·A computed here.
func TestExportMergesWholeModel(t *testing.T) {
	be := transformertest.CPUBackend(t)
	a := transformertest.TinyArch("llama")
	a.DModel, a.NHeads, a.NKVHeads, a.DFF, a.NLayers = 256, 8, 4, 256, 4 // whole q4_K blocks
	path := transformertest.WriteTiny(t, a, ggml.F16, 7)
	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 3, Alpha: 5, Targets: []string{"q", "v", "down"}})
	require.NoError(t, err)
	defer ad.Close()
	vals := randomizeAdapter(t, ad, rand.New(rand.NewPCG(81, 82)))
	adapter := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(adapter, nil))
	scale := float64(ad.Options().Alpha / float32(ad.Options().Rank))

	dir := t.TempDir()
	converted, merged := filepath.Join(dir, "converted.gguf"), filepath.Join(dir, "merged.gguf")
	_, err = decoding.Export(path, converted, decoding.ExportOptions{Type: decoding.FileTypeQ4_K_M, Threads: 2})
	require.NoError(t, err)
	rep, err := decoding.Export(path, merged, decoding.ExportOptions{Type: decoding.FileTypeQ4_K_M, Threads: 2, Adapters: []decoding.LoRA{{Path: adapter}}})
	require.NoError(t, err)
	c, err := ggml.OpenGGUF(converted)
	require.NoError(t, err)
	defer c.Close()
	g, err := ggml.OpenGGUF(merged)
	require.NoError(t, err)
	defer g.Close()
	adapted, types := 0, map[ggml.Type]bool{}
	for _, tc := range c.Tensors() {
		tg, ok := g.Tensor(tc.Name)
		require.True(t, ok, tc.Name)
		require.Equal(t, ggml.TypeName(tc.Type), ggml.TypeName(tg.Type), "%s: the merge converts as the conversion does", tc.Name)
		types[tg.Type] = true
		got, err := g.ReadTensorData(tc.Name)
		require.NoError(t, err)
		A, ok := vals[tc.Name+".lora_a"]
		if !ok {
			want, err := c.ReadTensorData(tc.Name)
			require.NoError(t, err)
			assert.True(t, slices.Equal(want, got), "%s is the conversion's", tc.Name)
			continue
		}
		adapted++
		B := vals[tc.Name+".lora_b"]
		w := decodingtest.Dequantize(t, m.Tensor(tc.Name))
		in, outRows := int(tc.Ne[0]), int(tc.Ne[1])
		r := len(A) / in
		ref := make([]float32, len(w))
		for o := range outRows {
			for i := range in {
				d := 0.0
				for k := range r {
					d += scale * float64(B[o*r+k]) * float64(A[k*in+i])
				}
				ref[o*in+i] = float32(float64(w[o*in+i]) + d)
			}
		}
		want, err := ggml.Quantize(tg.Type, ref, in)
		require.NoError(t, err)
		assert.True(t, slices.Equal(want, got), "%s as %s: the quantized float64 merge", tc.Name, ggml.TypeName(tg.Type))
	}
	assert.Equal(t, 3*a.NLayers, adapted)
	assert.True(t, types[ggml.Q4_K] && types[ggml.Q6_K], "the mix: %v", rep.Types)
	assert.Equal(t, rep.Converted, len(c.Tensors())-2*a.NLayers-2, "every matrix and the embeddings, not the norms or rope_freqs")
}

// TestExportMergeIntoQuantizedBase: an adapter merged into a Q4_K_M model and written as Q4_K_M
// again needs no requantizing leave and is not refused for its adapted matrices' narrow rows
// (all fallbacks): the tensors it does not touch keep the base's bytes, the adapted ones their
// type, and the merge changes them.
func TestExportMergeIntoQuantizedBase(t *testing.T) {
	be := transformertest.CPUBackend(t)
	a := transformertest.TinyArch("smollm2") // rows of 96: q5_0 and q8_0 in Q4_K_M
	a.DFF = 256                              // but ffn_down's 256: q4_K and q6_K
	f16 := transformertest.WriteTiny(t, a, ggml.F16, 3)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.gguf")
	_, err := decoding.Export(f16, base, decoding.ExportOptions{Type: decoding.FileTypeQ4_K_M})
	require.NoError(t, err)
	m := decodingtest.OpenTiny(t, base, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 4, Targets: []string{"q", "v"}})
	require.NoError(t, err)
	defer ad.Close()
	randomizeAdapter(t, ad, rand.New(rand.NewPCG(5, 6)))
	adapter := filepath.Join(dir, "adapter.gguf")
	require.NoError(t, ad.Save(adapter, nil))
	merged := filepath.Join(dir, "merged.gguf")
	rep, err := decoding.Export(base, merged, decoding.ExportOptions{Type: decoding.FileTypeQ4_K_M, Adapters: []decoding.LoRA{{Path: adapter}}})
	require.NoError(t, err)
	assert.Equal(t, 2*a.NLayers, rep.Converted, "only the adapted matrices are re-encoded")
	b, err := ggml.OpenGGUF(base)
	require.NoError(t, err)
	defer b.Close()
	g, err := ggml.OpenGGUF(merged)
	require.NoError(t, err)
	defer g.Close()
	for _, tb := range b.Tensors() {
		tg, ok := g.Tensor(tb.Name)
		require.True(t, ok, tb.Name)
		assert.Equal(t, ggml.TypeName(tb.Type), ggml.TypeName(tg.Type), tb.Name)
		want, err := b.ReadTensorData(tb.Name)
		require.NoError(t, err)
		got, err := g.ReadTensorData(tb.Name)
		require.NoError(t, err)
		adapted := strings.Contains(tb.Name, "attn_q.") || strings.Contains(tb.Name, "attn_v.")
		assert.Equal(t, !adapted, slices.Equal(want, got), "%s: copied unless adapted", tb.Name)
	}
}
