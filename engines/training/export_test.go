package training

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
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
