package training

import (
	"encoding/binary"
	"math"
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
	"github.com/toyml/toy/internal/reference"
)

// TestMergeRequantizes: MergeLoRA into a block-quantized type writes, for each adapted weight,
// exactly the bytes of ggml's quantizer applied to the float64 merge of the base's dequantized
// weight and scale·B·A (a dequantize→merge→requantize reference computed here), and every other
// tensor as the base holds it; rows that do not split into the type's blocks are refused.
func TestMergeRequantizes(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	a.DModel, a.NHeads, a.NKVHeads, a.DFF = 256, 8, 4, 256 // rows of 256: whole q4_K blocks
	path := transformertest.WriteTiny(t, a, ggml.Q8_0, 7)
	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 3, Alpha: 5, Targets: []string{"q", "v", "down"}})
	require.NoError(t, err)
	defer ad.Close()
	vals := randomizeAdapter(t, ad, rand.New(rand.NewPCG(71, 72)))
	adapter := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, ad.Save(adapter, nil))
	scale := float64(ad.Options().Alpha / float32(ad.Options().Rank)) // as the loader computes it

	baseFile, err := ggml.OpenGGUF(path)
	require.NoError(t, err)
	defer baseFile.Close()
	matrices := m.Matrices()
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.Q4_0, ggml.Q4_K} {
		out := filepath.Join(t.TempDir(), "merged.gguf")
		require.NoError(t, decoding.MergeLoRA(path, []decoding.LoRA{{Path: adapter}}, out, typ))
		merged, err := ggml.OpenGGUF(out)
		require.NoError(t, err)
		adapted := 0
		for _, ti := range baseFile.Tensors() {
			got, err := merged.ReadTensorData(ti.Name)
			require.NoError(t, err)
			A, ok := vals[ti.Name+".lora_a"]
			if !ok {
				want, err := baseFile.ReadTensorData(ti.Name)
				require.NoError(t, err)
				assert.Equal(t, want, got, "%s is copied", ti.Name)
				continue
			}
			adapted++
			B := vals[ti.Name+".lora_b"]
			w := decodingtest.Dequantize(t, matrices[ti.Name])
			in, outRows := int(ti.Ne[0]), int(ti.Ne[1])
			r := len(A) / in
			ref := make([]float32, len(w))
			for o := 0; o < outRows; o++ {
				delta := make([]float64, in)
				for k := 0; k < r; k++ {
					c := scale * float64(B[o*r+k])
					for i := range delta {
						delta[i] += c * float64(A[k*in+i])
					}
				}
				for i := range delta {
					ref[o*in+i] = float32(float64(w[o*in+i]) + delta[i])
				}
			}
			want, err := ggml.Quantize(typ, ref, in)
			require.NoError(t, err)
			assert.Equal(t, want, got, "%s as %s: the requantized float64 merge", ti.Name, ggml.TypeName(typ))
		}
		merged.Close()
		assert.Equal(t, 3*a.NLayers, adapted)
		mm := decodingtest.OpenTiny(t, out, decoding.ModelOptions{Backend: be})
		assert.Equal(t, typ, mm.WeightType())
	}

	b := transformertest.TinyArch("llama") // rows of 128
	small := transformertest.WriteTiny(t, b, ggml.Q8_0, 8)
	sm := decodingtest.OpenTiny(t, small, decoding.ModelOptions{Backend: be})
	sad, err := NewAdapter(sm, LoRAOptions{Rank: 2})
	require.NoError(t, err)
	defer sad.Close()
	require.NoError(t, sad.Init())
	sadPath := filepath.Join(t.TempDir(), "small.gguf")
	require.NoError(t, sad.Save(sadPath, nil))
	err = decoding.MergeLoRA(small, []decoding.LoRA{{Path: sadPath}}, filepath.Join(t.TempDir(), "x.gguf"), ggml.Q4_K)
	assert.ErrorContains(t, err, "not a multiple of q4_K's block of 256")
}

// TestConvert: MergeLoRA without adapters stores every weight matrix and the token embeddings
// as the type asked for (in f16, each f32 value rounded as the reference's F32ToF16 rounds it),
// copies every other tensor, and the converted model's logits are the f32 model's within f16's
// rounding of the weights.
func TestConvert(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	path := transformertest.WriteTiny(t, a, ggml.F32, 9)
	out := filepath.Join(t.TempDir(), "f16.gguf")
	require.NoError(t, decoding.MergeLoRA(path, nil, out, ggml.F16))

	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
	converted := m.Matrices()
	converted[m.TokEmbd.Name()] = m.TokEmbd
	src, err := ggml.OpenGGUF(path)
	require.NoError(t, err)
	defer src.Close()
	dst, err := ggml.OpenGGUF(out)
	require.NoError(t, err)
	defer dst.Close()
	n := 0
	for _, ti := range src.Tensors() {
		raw, err := src.ReadTensorData(ti.Name)
		require.NoError(t, err)
		got, err := dst.ReadTensorData(ti.Name)
		require.NoError(t, err)
		if converted[ti.Name] == nil {
			assert.Equal(t, raw, got, "%s is copied", ti.Name)
			continue
		}
		n++
		want := make([]byte, len(raw)/2)
		for i := range len(raw) / 4 {
			binary.LittleEndian.PutUint16(want[2*i:], reference.F32ToF16(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))))
		}
		assert.Equal(t, want, got, "%s in f16", ti.Name)
	}
	assert.Equal(t, len(converted), n)

	logits := func(path string) []float32 {
		m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{Backend: be})
		d, err := decoding.NewDecoder(m, decoding.DecoderOptions{})
		require.NoError(t, err)
		defer d.Close()
		l, err := d.Prompt(transformertest.RandomTokens(rand.New(rand.NewPCG(5, 6)), 9, a.Vocab))
		require.NoError(t, err)
		return slices.Clone(l)
	}
	want, got := logits(path), logits(out)
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		require.InDelta(t, want[i], got[i], 0.02*scale, "logit %d", i)
	}
	assert.Equal(t, ggml.F16, decodingtest.OpenTiny(t, out, decoding.ModelOptions{Backend: be}).WeightType())
}
