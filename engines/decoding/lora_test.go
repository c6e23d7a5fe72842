package decoding

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestLoRAMatchesMergedReference applies an adapter (attention and FFN matrices of both
// layers, two of them adapted twice by two files) at load and checks the decoder's logits
// against the float64 reference run on the merged weights W + scale·B·A.
func TestLoRAMatchesMergedReference(t *testing.T) {
	a := transformertest.TinyArch("llama")
	path := transformertest.WriteTiny(t, a, ggml.F32, 1)
	base := openTiny(t, path, ModelOptions{})
	ref := &transformertest.RefInfer{A: base.Arch, W: loadedWeights(t, base)}
	rng := rand.New(rand.NewPCG(7, 7))
	d, ff, kv := a.DModel, a.DFF, a.NKVHeads*a.HeadDimK
	parts := []transformertest.LoRAPart{
		transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d, d, 4),
		transformertest.RandomLoRAPart(rng, "blk.1.attn_v.weight", d, kv, 4),
		transformertest.RandomLoRAPart(rng, "blk.0.ffn_down.weight", ff, d, 4),
		transformertest.RandomLoRAPart(rng, "blk.1.ffn_up.weight", d, ff, 4),
	}
	second := []transformertest.LoRAPart{transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d, d, 2)}
	p1 := transformertest.WriteLoRA(t, "llama", 8, parts)
	p2 := transformertest.WriteLoRA(t, "llama", 0, second)
	for _, p := range parts {
		transformertest.MergeLoRAPart(ref.W[p.Base], p, 0.5*8/4) // user scale 0.5 · alpha 8 / rank 4
	}
	transformertest.MergeLoRAPart(ref.W[second[0].Base], second[0], 1) // alpha 0: the user scale alone
	m := openTiny(t, path, ModelOptions{LoRA: []LoRA{{Path: p1, Scale: 0.5}, {Path: p2}}})
	seq := transformertest.RandomTokens(rng, 9, a.Vocab)
	want := ref.Logits(seq)
	dec := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 4)
	got, err := dec.Logits(seq)
	require.NoError(t, err)
	e := transformertest.RelErr(got, want)
	assert.Less(t, e, 1e-4, "relative error %.3g", e)

	plain := newDecoder(t, base, DecoderOptions{KVType: KVF32}, 4)
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
		"shape":   {transformertest.WriteLoRA(t, "llama", 1, []transformertest.LoRAPart{transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d+1, d, 2)}), "do not fit the weight"},
		"unknown": {transformertest.WriteLoRA(t, "llama", 1, []transformertest.LoRAPart{transformertest.RandomLoRAPart(rng, "blk.9.attn_q.weight", d, d, 2)}), "is not a weight matrix"},
		"arch":    {transformertest.WriteLoRA(t, "qwen2", 1, []transformertest.LoRAPart{transformertest.RandomLoRAPart(rng, "blk.0.attn_q.weight", d, d, 2)}), `an adapter for "qwen2"`},
		"model":   {path, "not an adapter"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := OpenModel(path, ModelOptions{LoRA: []LoRA{{Path: c.adapter}}})
			assert.ErrorContains(t, err, c.want)
		})
	}
}
