package training

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// sumOfSquares is Σ g² over the gradients a keepGrads trainer read for ws, in float64.
func sumOfSquares(t *testing.T, tr *Trainer, ws []*ggml.Tensor) float64 {
	t.Helper()
	var s float64
	for _, w := range ws {
		g, err := tr.grad(w)
		require.NoError(t, err)
		for _, v := range g {
			s += float64(v) * float64(v)
		}
	}
	return s
}

// TestGradNorm: the gradient norm a step reports is the L2 norm of every trained tensor's
// gradient, summed in float64 here from the gradients themselves: a model's (every weight,
// through the GEMM backward and autodiff), an adapter's whose first block a separate graph
// recomputes (its gradients are in that graph), and a data-parallel replica's (the reduced
// gradients, in the optimizer graph).
func TestGradNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	noStep := [7]float32{0, 0.9, 0.999, 1e-8, 0, 10, 1000}
	t.Run("model", func(t *testing.T) {
		m, err := New(tinyConfig(t, false, true), newBackend(t))
		require.NoError(t, err)
		defer m.Close()
		randomize(t, m, rng)
		tr, err := newTrainer(m, 5, 2, true, false)
		require.NoError(t, err)
		defer tr.Close()
		for range 2 {
			_, err = tr.Step(randomSeqs(rng, 2, 5, m.Arch.Vocab), noStep, noStep)
			require.NoError(t, err)
			want := math.Sqrt(sumOfSquares(t, tr, m.Weights()))
			assert.InEpsilon(t, want, tr.GradNorm(), 1e-5)
		}
	})
	t.Run("lora recomputed", func(t *testing.T) {
		a := transformertest.TinyArch("llama")
		a.NLayers = 3
		m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 3), decoding.ModelOptions{Backend: newBackend(t)})
		ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"q", "v", "up"}, Recompute: 1})
		require.NoError(t, err)
		defer ad.Close()
		randomizeAdapter(t, ad, rng)
		tr, err := newTrainer(ad, 6, 2, true, false)
		require.NoError(t, err)
		defer tr.Close()
		_, err = tr.Step([][]int32{transformertest.RandomTokens(rng, 7, a.Vocab), transformertest.RandomTokens(rng, 7, a.Vocab)}, noStep, noStep)
		require.NoError(t, err)
		sq := sumOfSquares(t, tr, ad.Tensors())
		var recomputed float64
		for _, w := range ad.Tensors() {
			if !tr.rc.trains(w) {
				recomputed += sumOfSquares(t, tr, []*ggml.Tensor{w})
			}
		}
		require.Greater(t, recomputed, 0.0, "the recomputed block's adapters have gradients")
		assert.InEpsilon(t, math.Sqrt(sq), tr.GradNorm(), 1e-5)
	})
	t.Run("data-parallel", func(t *testing.T) {
		seqs := randomSeqs(rng, 2, dpSeq, 64)
		norm := func(opts ...TrainerOption) float64 {
			c := tinyConfig(t, true, false)
			c.Vocab, c.Context = 64, dpSeq
			m, err := New(c, newBackend(t))
			require.NoError(t, err)
			defer m.Close()
			require.NoError(t, m.Init())
			tr, err := NewTrainer(m, dpSeq, 2, opts...)
			require.NoError(t, err)
			defer tr.Close()
			_, err = tr.Step(seqs, noStep, noStep)
			require.NoError(t, err)
			return tr.GradNorm()
		}
		want := norm()
		require.Greater(t, want, 0.0)
		assert.InEpsilon(t, want, norm(DataParallel(&soleReducer{})), 1e-6)
	})
}

// TestNonFiniteStops: a step whose loss or gradient norm is not finite is an error the
// trainers stop at (NonFiniteError): a model with one NaN weight fails its first step with a
// NaN loss (not the 0 that ggml's clamp of a NaN probability made it), a learning rate of
// 1e30 fails within a few steps, and CheckFinite finds the weight.
func TestNonFiniteStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 3))
	step := func(lr float32) [7]float32 { return [7]float32{lr, 0.9, 0.999, 1e-8, 0, 10, 1000} }
	newModel := func(t *testing.T) *Model {
		m, err := New(tinyConfig(t, true, false), newBackend(t))
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		require.NoError(t, m.Init())
		return m
	}
	for _, masked := range []bool{false, true} {
		m := newModel(t)
		require.NoError(t, checkFiniteTensors(m.Weights()))
		w := m.Weights()[3]
		vals, err := w.F32()
		require.NoError(t, err)
		vals[len(vals)/2] = float32(math.NaN())
		require.NoError(t, w.SetF32(vals))
		assert.ErrorContains(t, checkFiniteTensors(m.Weights()), w.Name())
		tr, err := newTrainer(m, 5, 2, false, masked)
		require.NoError(t, err)
		loss, err := tr.Step(randomSeqs(rng, 2, 5, m.Arch.Vocab), step(1e-3), step(1e-3))
		var nf *NonFiniteError
		require.ErrorAs(t, err, &nf, "masked %v", masked)
		assert.True(t, math.IsNaN(float64(loss)), "the loss of a NaN model is NaN, not %v", loss)
		assert.ErrorContains(t, tr.CheckFinite(), "NaN")
		tr.Close()
	}

	m := newModel(t)
	tr, err := NewTrainer(m, 5, 2)
	require.NoError(t, err)
	defer tr.Close()
	var nf *NonFiniteError
	for i := 0; i < 5 && nf == nil; i++ {
		_, err = tr.Step(randomSeqs(rng, 2, 5, m.Arch.Vocab), step(1e30), step(1e30))
		if err != nil {
			require.ErrorAs(t, err, &nf)
		}
	}
	require.NotNil(t, nf, "a learning rate of 1e30 makes a step non-finite")
	assert.Contains(t, nf.Error(), nf.Quantity)
}
