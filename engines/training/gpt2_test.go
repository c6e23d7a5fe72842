package training

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestGPT2Init checks NewGPT2's initialisation as GPT-2 and nanoGPT do it: matrices and token
// embeddings N(0, 0.02²), the projections into the residual stream scaled by 1/√(2·layers),
// position embeddings N(0, 0.01²), LayerNorm scales 1 and every bias 0.
func TestGPT2Init(t *testing.T) {
	be := newBackend(t)
	g := tinyGPT2(t, true)
	g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context, g.InitScale = 64, 64, 256, 4, 8, 64, 0.02
	m, err := NewGPT2(g, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	assert.Equal(t, transformer.GPT2Arch, m.Arch.Name)
	std := func(name string) float64 {
		for _, w := range m.Weights() {
			if w.Name() == name {
				v, err := w.F32()
				require.NoError(t, err)
				s := 0.0
				for _, x := range v {
					s += float64(x) * float64(x)
				}
				return math.Sqrt(s / float64(len(v)))
			}
		}
		t.Fatalf("no tensor %s", name)
		return 0
	}
	resid := 0.02 / math.Sqrt(2*8)
	for name, want := range map[string]float64{
		"token_embd.weight": 0.02, "position_embd.weight": 0.01, "blk.0.attn_qkv.weight": 0.02,
		"blk.0.ffn_up.weight": 0.02, "blk.3.attn_output.weight": resid, "blk.7.ffn_down.weight": resid,
	} {
		assert.InDelta(t, want, std(name), want*0.05, name)
	}
	for _, name := range []string{"blk.0.attn_qkv.bias", "blk.0.attn_output.bias", "blk.0.ffn_up.bias", "blk.0.ffn_down.bias",
		"blk.0.attn_norm.bias", "output_norm.bias"} {
		assert.Zero(t, std(name), name)
	}
	assert.Equal(t, 1.0, std("output_norm.weight"))
	assert.Equal(t, 1.0, std("blk.2.ffn_norm.weight"))
}

// TestOracleGPT2Checkpoint: a GPT-2 checkpoint toy trains (NewGPT2, Init, a few AdamW steps,
// Save) decodes in toy with the training forward's logits, and llama.cpp loads it and gives
// the same logits: the keys and tensor names toy writes are those llama.cpp's gpt2 loader
// reads.
func TestOracleGPT2Checkpoint(t *testing.T) {
	if ggml.BackendKind != "cpu" {
		t.Skip("the oracle runs on the CPU; compare there")
	}
	be := newBackend(t)
	for _, tied := range []bool{true, false} {
		t.Run(map[bool]string{true: "tied", false: "untied"}[tied], func(t *testing.T) {
			g := tinyGPT2(t, tied)
			g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context, g.InitScale, g.Seed = 48, 64, 256, 4, 2, 16, 0.2, 3
			m, err := NewGPT2(g, be)
			require.NoError(t, err)
			defer m.Close()
			require.NoError(t, m.Init())
			tr, err := NewTrainer(m, 8, 2)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(3, 3))
			seqs := [][]int32{transformertest.RandomTokens(rng, 9, g.Vocab), transformertest.RandomTokens(rng, 9, g.Vocab)}
			var first, last float32
			for i := 0; i < 6; i++ { // the same batch: its loss falls
				step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, float32(1 / (1 - math.Pow(0.9, float64(i+1)))), float32(1 / (1 - math.Pow(0.999, float64(i+1))))}
				loss, err := tr.Step(seqs, step, step)
				require.NoError(t, err)
				if i == 0 {
					first = loss
				}
				last = loss
			}
			tr.Close()
			require.Less(t, last, first, "training moves the weights")

			seq := oracleSeq(g.Vocab)
			ev, err := NewEvaluator(m, len(seq), 1)
			require.NoError(t, err)
			_, err = ev.Loss([][]int32{append(append([]int32(nil), seq...), 0)})
			require.NoError(t, err)
			flat, err := ev.logits.F32()
			require.NoError(t, err)
			ev.Close()
			train := make([][]float64, len(seq))
			for i := range train {
				for _, v := range flat[i*g.Vocab : (i+1)*g.Vocab] {
					train[i] = append(train[i], float64(v))
				}
			}

			path := filepath.Join(t.TempDir(), "model.gguf")
			require.NoError(t, m.Save(path, transformertest.NoVocab))
			got := toyLogits(t, path, decoding.ModelOptions{Backend: be})
			assert.Less(t, transformertest.RelErr(got, train), 1e-3, "toy's decoder gives the training forward's logits")
			want, err := openOracle(t, path).Logits(seq)
			require.NoError(t, err)
			e := transformertest.RelErr32(got, want)
			t.Logf("trained gpt2 checkpoint (tied %v): toy vs llama.cpp max relative error %.2e, training forward vs llama.cpp %.2e",
				tied, e, transformertest.RelErr(want, train))
			assert.Less(t, e, oracleTol, "llama.cpp gives toy's logits")
		})
	}
}
