package training

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestHeadLossChunks: the chunked loss of a frozen head gives the same loss and LoRA gradients
// in chunks of 2 rows as in one chunk (which TestAdapterGradients and TestMaskedLoss check
// against finite differences), with and without a loss mask, as the evaluator's loss does
// (and the loss from its logits when it keeps them); the trainer of an adapter keeps no dense
// labels. The hidden states' gradient is a GEMM with the head's transposed f16 copy. The
// trainer multiplies every weight in its own type, as the evaluator does.
func TestHeadLossChunks(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.F16} {
		t.Run(typ.String(), func(t *testing.T) { testHeadLossChunks(t, typ) })
	}
}

func testHeadLossChunks(t *testing.T, typ ggml.Type) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, typ, 3), decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"q", "v", "down"}})
	require.NoError(t, err)
	defer ad.Close()
	rng := rand.New(rand.NewPCG(41, 42))
	randomizeAdapter(t, ad, rng)
	const T, B = 6, 2
	seqs := [][]int32{transformertest.RandomTokens(rng, T+1, a.Vocab), transformertest.RandomTokens(rng, T+1, a.Vocab)}
	keep := [][]bool{{false, true, true, true, false, true}, {false, true, false, false, true, false}}

	run := func(chunkBytes int, masked bool) (float32, map[string][]float32) {
		defer func(b int) { headChunkBytes = b }(headChunkBytes)
		headChunkBytes = chunkBytes
		tr, err := newTrainer(ad, T, B, true, masked)
		require.NoError(t, err)
		defer tr.Close()
		require.NotNil(t, tr.in.head)
		assert.Nil(t, tr.in.labels, "no dense labels")
		assert.Equal(t, headChunkRows(a.Vocab, T*B), tr.in.head.rows)
		var k [][]bool
		if masked {
			k = keep
		}
		loss, err := tr.StepMasked(seqs, k, noStep, noStep)
		require.NoError(t, err)
		grads := map[string][]float32{}
		for _, w := range ad.Tensors() {
			grads[w.Name()], err = tr.grad(w)
			require.NoError(t, err)
		}
		return loss, grads
	}
	evaluate := func(keepLogits, masked bool) float32 {
		defer func(b int) { headChunkBytes = b }(headChunkBytes)
		headChunkBytes = 2 * 4 * a.Vocab
		ev, err := newEvaluator(ad, T, B, masked, keepLogits)
		require.NoError(t, err)
		defer ev.Close()
		assert.Equal(t, keepLogits, ev.logits != nil)
		var k [][]bool
		if masked {
			k = keep
		}
		loss, err := ev.LossMasked(seqs, k)
		require.NoError(t, err)
		return loss
	}
	const evalDelta = 1e-5
	for _, masked := range []bool{false, true} {
		whole, wholeGrads := run(1<<30, masked)
		chunked, chunkedGrads := run(2*4*a.Vocab, masked)
		assert.InDelta(t, whole, chunked, 1e-5, "loss, masked %v", masked)
		for name, g := range wholeGrads {
			assert.InDeltaSlice(t, g, chunkedGrads[name], 1e-5, "%s, masked %v", name, masked)
		}
		assert.InDelta(t, whole, evaluate(false, masked), evalDelta, "the evaluator's chunked loss, masked %v", masked)
		assert.InDelta(t, whole, evaluate(true, masked), evalDelta, "the evaluator's loss from the logits, masked %v", masked)
	}
}
