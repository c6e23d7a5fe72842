package training

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// TestRecompute: recomputing the first blocks of an adapter's base (LoRAOptions.Recompute),
// the attention probabilities of the others (RecomputeAttention), or both, gives the loss and
// adapter gradients of the trainer that keeps every activation (which TestAdapterGradients and
// TestMaskedLoss check against finite differences), with and without a loss mask, and the same
// adapters after AdamW steps, on a q8_0 base and an f16 one (whose products' input gradients
// use transposed copies made once). The wide case (70 positions, heads of 64) is large enough
// for toy's packed GEMM to compute attention's products on the CPU, skipping the causal mask's
// zeros, in the trainer and in the recomputed passes alike.
func TestRecompute(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.F16} {
		t.Run(typ.String(), func(t *testing.T) { testRecompute(t, typ, false) })
	}
	t.Run("wide", func(t *testing.T) { testRecompute(t, ggml.F16, true) })
}

func testRecompute(t *testing.T, typ ggml.Type, wide bool) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	a.NLayers = 3
	T, B := 6, 2
	if wide {
		a.HeadDimK, a.HeadDimV, a.Context, T = 64, 64, 80, 70
		a.QueryScale = 0.125
	}
	m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, typ, 3), decoding.ModelOptions{Backend: be})
	rng := rand.New(rand.NewPCG(51, 52))
	seqs := [][]int32{transformertest.RandomTokens(rng, T+1, a.Vocab), transformertest.RandomTokens(rng, T+1, a.Vocab)}
	keep := [][]bool{make([]bool, T), make([]bool, T)}
	for i := range T {
		keep[0][i] = i%6 != 0 && i%6 != 4
		keep[1][i] = i%6 == 1 || i%6 == 4
	}
	adapter := func(recompute int, attention bool) *Adapter {
		ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"q", "v", "o", "up"}, Recompute: recompute, RecomputeAttention: attention})
		require.NoError(t, err)
		t.Cleanup(func() { ad.Close() })
		randomizeAdapter(t, ad, rand.New(rand.NewPCG(53, 54)))
		return ad
	}
	step := [7]float32{1e-2, 0.9, 0.999, 1e-8, 0, 10, 1000}
	type result struct {
		losses []float32
		grads  map[string][]float32
		after  map[string][]float32
	}
	run := func(recompute int, attention, masked bool) result {
		ad := adapter(recompute, attention)
		tr, err := newTrainer(ad, T, B, true, masked)
		require.NoError(t, err)
		defer tr.Close()
		var k [][]bool
		if masked {
			k = keep
		}
		r := result{grads: map[string][]float32{}, after: map[string][]float32{}}
		loss, err := tr.StepMasked(seqs, k, noStep, noStep)
		require.NoError(t, err)
		r.losses = append(r.losses, loss)
		for _, w := range ad.Tensors() {
			r.grads[w.Name()], err = tr.grad(w)
			require.NoError(t, err)
		}
		for range 3 {
			loss, err := tr.StepMasked(seqs, k, step, step)
			require.NoError(t, err)
			r.losses = append(r.losses, loss)
		}
		for _, w := range ad.Tensors() {
			r.after[w.Name()], err = w.F32()
			require.NoError(t, err)
		}
		return r
	}
	for _, masked := range []bool{false, true} {
		want := run(0, false, masked)
		for _, c := range []struct {
			n         int
			attention bool
		}{{1, false}, {3, false}, {0, true}, {1, true}} {
			got := run(c.n, c.attention, masked)
			what := fmt.Sprintf("recompute %d, attention %v, masked %v", c.n, c.attention, masked)
			assert.Equal(t, want.losses, got.losses, "losses, %s", what)
			for name, g := range want.grads {
				assert.Equal(t, g, got.grads[name], "gradient of %s, %s", name, what)
				assert.Equal(t, want.after[name], got.after[name], "%s after steps, %s", name, what)
			}
		}
	}
	_, err := NewAdapter(m, LoRAOptions{Recompute: 4})
	assert.ErrorContains(t, err, "the model has 3")
	_, err = NewTrainer(adapter(1, false), T, B, DataParallel(sumOfOne{}))
	assert.ErrorContains(t, err, "data-parallel training cannot recompute blocks")
}

// sumOfOne is the GradientReducer of a job of one replica.
type sumOfOne struct{}

func (sumOfOne) AllReduceSum([]float32) error { return nil }
