package decoding

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestHiddenMatchesReference: Decoder.Hidden's rows are the float64 reference's final hidden
// states (after the output norm) at every position, for every architecture, in batches
// smaller than the input; the decoder computes logits as before afterwards; an input past the
// context is refused.
func TestHiddenMatchesReference(t *testing.T) {
	const T = 9
	for _, variant := range transformertest.AllVariants {
		t.Run(variant, func(t *testing.T) {
			a := transformertest.TinyArch(variant)
			m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 3), ModelOptions{})
			ref := &transformertest.RefInfer{A: m.Arch, W: loadedWeights(t, m)}
			seq := transformertest.RandomTokens(rand.New(rand.NewPCG(4, uint64(len(variant)))), T, a.Vocab)
			wantLogits := ref.Logits(seq)
			want := ref.Final
			tol := 1e-4
			if a.FFN == transformer.FFNGeGLU || a.FFN == transformer.FFNGELU {
				tol = 1e-3 // ggml's f16 GELU table, as TestDecoderMatchesReference
			}
			d := newDecoder(t, m, DecoderOptions{KVType: KVF32, Batch: 4}, 4)
			got, err := d.Hidden(seq)
			if unsupportedHere(t, err) {
				return
			}
			require.NoError(t, err)
			require.Len(t, got, T)
			scale, worst := 0.0, 0.0
			for i := range want {
				require.Len(t, got[i], a.DModel)
				for j, w := range want[i] {
					scale = max(scale, math.Abs(w))
					worst = max(worst, math.Abs(float64(got[i][j])-w))
				}
			}
			assert.Less(t, worst/scale, tol, "relative error of the hidden states")
			lg, err := d.Logits(seq)
			require.NoError(t, err)
			assert.Less(t, transformertest.RelErr(lg, wantLogits), tol, "logits after Hidden")
			_, err = d.Hidden(make([]int32, d.MaxContext()+1))
			assert.ErrorIs(t, err, ErrContextFull)
		})
	}
}
