package training

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

type loraPart struct {
	base          string
	in, out, rank int
	a, b          []float32 // ggml layout: a [in, r], b [r, out]
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// writeLoRA writes an adapter file as llama.cpp does, with an independent writer.
func writeLoRA(t *testing.T, arch string, alpha float32, parts []loraPart) string {
	var w gguffile.Writer
	require.NoError(t, w.AddKV("general.architecture", arch))
	require.NoError(t, w.AddKV("general.type", "adapter"))
	require.NoError(t, w.AddKV("adapter.type", "lora"))
	require.NoError(t, w.AddKV("adapter.lora.alpha", alpha))
	for _, p := range parts {
		require.NoError(t, w.AddTensor(p.base+".lora_a", gguffile.TypeF32, []int64{int64(p.in), int64(p.rank)}, f32Bytes(p.a)))
		require.NoError(t, w.AddTensor(p.base+".lora_b", gguffile.TypeF32, []int64{int64(p.rank), int64(p.out)}, f32Bytes(p.b)))
	}
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, w.WriteFile(path))
	return path
}

func randomPart(rng *rand.Rand, base string, in, out, rank int) loraPart {
	p := loraPart{base: base, in: in, out: out, rank: rank, a: make([]float32, in*rank), b: make([]float32, rank*out)}
	for i := range p.a {
		p.a[i] = float32(rng.NormFloat64() * 0.3)
	}
	for i := range p.b {
		p.b[i] = float32(rng.NormFloat64() * 0.3)
	}
	return p
}

// merge adds scale·B·A to the reference weight (ggml layout W[o·in + i]).
func merge(w []float64, p loraPart, scale float64) {
	for o := 0; o < p.out; o++ {
		for i := 0; i < p.in; i++ {
			s := 0.0
			for r := 0; r < p.rank; r++ {
				s += float64(p.b[o*p.rank+r]) * float64(p.a[r*p.in+i])
			}
			w[o*p.in+i] += scale * s
		}
	}
}

// TestLoRAMatchesMergedReference applies an adapter (attention and FFN matrices of both
// layers, two of them adapted twice by two files) at load and checks the decoder's logits
// against the float64 reference run on the merged weights W + scale·B·A.
func TestLoRAMatchesMergedReference(t *testing.T) {
	a := transformertest.TinyArch("llama")
	path := transformertest.WriteTiny(t, a, ggml.F32, 1)
	base := decodingtest.OpenTiny(t, path, decoding.ModelOptions{})
	ref := &transformertest.RefInfer{A: base.Arch, W: decodingtest.LoadedWeights(t, base)}
	rng := rand.New(rand.NewPCG(7, 7))
	d, ff, kv := a.DModel, a.DFF, a.NKVHeads*a.HeadDimK
	parts := []loraPart{
		randomPart(rng, "blk.0.attn_q.weight", d, d, 4),
		randomPart(rng, "blk.1.attn_v.weight", d, kv, 4),
		randomPart(rng, "blk.0.ffn_down.weight", ff, d, 4),
		randomPart(rng, "blk.1.ffn_up.weight", d, ff, 4),
	}
	second := []loraPart{randomPart(rng, "blk.0.attn_q.weight", d, d, 2)}
	p1 := writeLoRA(t, "llama", 8, parts)
	p2 := writeLoRA(t, "llama", 0, second)
	for _, p := range parts {
		merge(ref.W[p.base], p, 0.5*8/4) // user scale 0.5 · alpha 8 / rank 4
	}
	merge(ref.W[second[0].base], second[0], 1) // alpha 0: the user scale alone
	m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{LoRA: []decoding.LoRA{{Path: p1, Scale: 0.5}, {Path: p2}}})
	seq := transformertest.RandomTokens(rng, 9, a.Vocab)
	want := ref.Logits(seq)
	dec := decodingtest.NewDecoder(t, m, decoding.DecoderOptions{KVType: decoding.KVF32}, 4)
	got, err := dec.Logits(seq)
	require.NoError(t, err)
	e := transformertest.RelErr(got, want)
	assert.Less(t, e, 1e-4, "relative error %.3g", e)

	plain := decodingtest.NewDecoder(t, base, decoding.DecoderOptions{KVType: decoding.KVF32}, 4)
	noLoRA, err := plain.Logits(seq)
	require.NoError(t, err)
	assert.Greater(t, transformertest.RelErr(noLoRA, want), 1e-2, "the adapter changes the logits")
}

func TestLoRARefusesBadAdapters(t *testing.T) {
	a := transformertest.TinyArch("llama")
	path := transformertest.WriteTiny(t, a, ggml.F32, 1)
	rng := rand.New(rand.NewPCG(8, 8))
	d := a.DModel
	for name, c := range map[string]struct {
		adapter string
		want    string
	}{
		"shape":   {writeLoRA(t, "llama", 1, []loraPart{randomPart(rng, "blk.0.attn_q.weight", d+1, d, 2)}), "do not fit the weight"},
		"unknown": {writeLoRA(t, "llama", 1, []loraPart{randomPart(rng, "blk.9.attn_q.weight", d, d, 2)}), "is not a weight matrix"},
		"arch":    {writeLoRA(t, "qwen2", 1, []loraPart{randomPart(rng, "blk.0.attn_q.weight", d, d, 2)}), `an adapter for "qwen2"`},
		"model":   {path, "not an adapter"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decoding.OpenModel(path, decoding.ModelOptions{LoRA: []decoding.LoRA{{Path: c.adapter}}})
			assert.ErrorContains(t, err, c.want)
		})
	}
}
