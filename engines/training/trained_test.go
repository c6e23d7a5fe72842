package training

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/generated/config"
)

// TestDecodesTrainedCheckpoint saves a model of the training engine — without RoPE scaling,
// with linear and with YaRN scaling — and decodes it: the decoder's logits match the training
// engine's own float64 reference and its training forward (the Evaluator's graph).
func TestDecodesTrainedCheckpoint(t *testing.T) {
	be := newBackend(t)
	for _, scaling := range []config.LlamaRopeScaling{"none", "linear", "yarn"} {
		t.Run(string(scaling), func(t *testing.T) {
			c := tinyConfig(t, false, true)
			scaleRope(&c, scaling)
			tm, err := New(c, be)
			require.NoError(t, err)
			defer tm.Close()
			ref := randomize(t, tm, rand.New(rand.NewPCG(41, 42)))
			path := filepath.Join(t.TempDir(), "trained.gguf")
			require.NoError(t, tm.Save(path, nil))
			m := decodingtest.OpenTiny(t, path, decoding.ModelOptions{})
			assert.Equal(t, transformer.ArchitectureFromConfig(c), m.Arch)
			seq := transformertest.RandomTokens(rand.New(rand.NewPCG(43, 44)), c.Context, c.Vocab)
			got, err := decodingtest.NewDecoder(t, m, decoding.DecoderOptions{KVType: decoding.KVF32}).Logits(seq)
			require.NoError(t, err)
			assert.Less(t, transformertest.RelErr(got, ref.Logits(seq, -1)), 1e-5, "against the float64 reference")

			ev, err := NewEvaluator(tm, c.Context, 1)
			require.NoError(t, err)
			defer ev.Close()
			_, err = ev.Loss([][]int32{append(append([]int32(nil), seq...), 0)})
			require.NoError(t, err)
			flat, err := ev.logits.F32()
			require.NoError(t, err)
			train := make([][]float64, len(seq))
			for i := range train {
				for _, v := range flat[i*c.Vocab : (i+1)*c.Vocab] {
					train[i] = append(train[i], float64(v))
				}
			}
			assert.Less(t, transformertest.RelErr(got, train), 1e-5, "against the training forward")
		})
	}
}
