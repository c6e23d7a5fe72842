package transformer_test

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestRandomQuantizedGGUF: a random block-quantized checkpoint's matrices, the large ones
// drawn from pools of quantized blocks, hold (dequantized by ggml) the values WriteRandomGGUFValues
// reports to within the type's rounding, have the intended spread, and no two equal rows.
func TestRandomQuantizedGGUF(t *testing.T) {
	for _, c := range []struct {
		typ ggml.Type
		tol float64 // RMS rounding error relative to the spread
	}{{ggml.Q8_0, 0.01}, {ggml.Q4_K, 0.15}} {
		t.Run(ggml.TypeName(c.typ), func(t *testing.T) {
			a := transformertest.TinyArch("llama")
			// Matrices large enough to draw from pools: ffn_down's rows split into q4_K's
			// super-blocks, the others' take q5_0.
			a.DFF, a.Vocab = 8448, 2048
			path := filepath.Join(t.TempDir(), "random.gguf")
			kept, err := transformer.WriteRandomGGUFValues(path, a, c.typ, 7, 1, true)
			require.NoError(t, err)
			m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{})
			got := decodingtest.LoadedWeights(t, m)
			pooled := 0
			for _, s := range a.TensorSpecs() {
				w := m.Tensor(s.Name)
				if !ggml.IsQuantized(w.Type()) {
					continue
				}
				if transformer.UsePool(w.Type(), s.Ne[0], w.Len()) {
					pooled++
				}
				want, have := kept[s.Name], got[s.Name]
				require.Len(t, have, len(want), s.Name)
				var sq, diff float64
				for i := range want {
					sq += have[i] * have[i]
					diff += (have[i] - float64(want[i])) * (have[i] - float64(want[i]))
				}
				std := transformer.RandomStd(a, s, 1)
				spread := math.Sqrt(sq / float64(len(have)))
				assert.InDelta(t, 1, spread/std, 0.2, "%s (%s): spread %.3g, want %.3g", s.Name, ggml.TypeName(w.Type()), spread, std)
				assert.Less(t, math.Sqrt(diff/float64(len(have)))/std, c.tol, "%s (%s): rounding", s.Name, ggml.TypeName(w.Type()))
				rows := map[uint64]bool{}
				n := int(s.Ne[0])
				for r := 0; r < len(have)/n; r++ {
					h := fnv.New64a()
					for _, v := range have[r*n : (r+1)*n] {
						h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
					}
					assert.False(t, rows[h.Sum64()], "%s: row %d repeats an earlier one", s.Name, r)
					rows[h.Sum64()] = true
				}
			}
			assert.Equal(t, 2+3*a.NLayers, pooled, "the embeddings, the output and each block's feed-forward are drawn from pools")
			if c.typ == ggml.Q4_K {
				assert.Equal(t, ggml.Q4_K, m.Tensor("blk.0.ffn_down.weight").Type())
			}
		})
	}
}
