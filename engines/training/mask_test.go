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

// refMaskedLoss is the mean next-token cross entropy under r of the positions keep keeps, over
// every sequence: the loss of a chat's assistant tokens only.
func refMaskedLoss(r *transformertest.RefInfer, seqs [][]int32, keep [][]bool) float64 {
	total, n := 0.0, 0
	for s, seq := range seqs {
		lg := r.Logits(seq[:len(seq)-1])
		for p, row := range lg {
			if !keep[s][p] {
				continue
			}
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, v)
			}
			sum := 0.0
			for _, v := range row {
				sum += math.Exp(v - mx)
			}
			total += -(row[seq[p+1]] - mx - math.Log(sum))
			n++
		}
	}
	return total / float64(n)
}

// TestMaskedLoss: with a loss mask, the trainer's loss and the gradient of every LoRA matrix
// equal those of a float64 reference that counts only the kept positions (central finite
// differences), the masked evaluator gives the same loss, and a mask keeping everything gives
// the unmasked trainer's loss and gradients.
func TestMaskedLoss(t *testing.T) {
	be := newBackend(t)
	a := transformertest.TinyArch("llama")
	m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 3), decoding.ModelOptions{Backend: be})
	ad, err := NewAdapter(m, LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"all"}})
	require.NoError(t, err)
	defer ad.Close()
	rng := rand.New(rand.NewPCG(31, 32))
	vals := randomizeAdapter(t, ad, rng)
	const T, B = 6, 2
	seqs := [][]int32{transformertest.RandomTokens(rng, T+1, a.Vocab), transformertest.RandomTokens(rng, T+1, a.Vocab)}
	keep := [][]bool{{false, false, true, true, false, true}, {false, true, false, false, false, false}}

	tr, err := newTrainer(ad, T, B, true, true)
	require.NoError(t, err)
	defer tr.Close()
	loss, err := tr.StepMasked(seqs, keep, noStep, noStep)
	require.NoError(t, err)
	base := decodingtest.LoadedWeights(t, m)
	ref := func() float64 { return refMaskedLoss(mergedRef(base, m.Arch, ad, vals), seqs, keep) }
	assert.InDelta(t, ref(), float64(loss), 1e-3*math.Max(1, float64(loss)), "loss")

	ev, err := NewMaskedEvaluator(ad, T, B)
	require.NoError(t, err)
	defer ev.Close()
	el, err := ev.LossMasked(seqs, keep)
	require.NoError(t, err)
	assert.InDelta(t, float64(loss), float64(el), 1e-5, "the evaluator's masked loss")

	for _, w := range ad.Tensors() {
		got, err := tr.grad(w)
		require.NoError(t, err)
		worst := worstFDErrorAt(rng, got, vals[w.Name()], 3, 1e-3, 1e-2, ref)
		assert.Less(t, worst, 1e-2, "%s: worst relative error %.3g", w.Name(), worst)
	}

	// Keeping every position is the unmasked loss.
	all := [][]bool{make([]bool, T), make([]bool, T)}
	for _, k := range all {
		for i := range k {
			k[i] = true
		}
	}
	plain, err := newTrainer(ad, T, B, true, false)
	require.NoError(t, err)
	defer plain.Close()
	want, err := plain.Step(seqs, noStep, noStep)
	require.NoError(t, err)
	got, err := tr.StepMasked(seqs, all, noStep, noStep)
	require.NoError(t, err)
	assert.InDelta(t, want, got, 1e-5)
	for _, w := range ad.Tensors() {
		g1, err := plain.grad(w)
		require.NoError(t, err)
		g2, err := tr.grad(w)
		require.NoError(t, err)
		assert.InDeltaSlice(t, g1, g2, 1e-5, w.Name())
	}
	_, err = plain.StepMasked(seqs, keep, noStep, noStep)
	assert.ErrorContains(t, err, "NewMaskedTrainer", "an unmasked trainer refuses a mask")
}

// TestAdapterLoad: an adapter saved and loaded into a fresh one of the same options has the
// same values, and one of another alpha is refused.
func TestAdapterLoad(t *testing.T) {
	be := newBackend(t)
	m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F32, 3), decoding.ModelOptions{Backend: be})
	opts := LoRAOptions{Rank: 2, Alpha: 3, Targets: []string{"q", "v"}}
	ad, err := NewAdapter(m, opts)
	require.NoError(t, err)
	defer ad.Close()
	vals := randomizeAdapter(t, ad, rand.New(rand.NewPCG(1, 2)))
	path := t.TempDir() + "/a.gguf"
	require.NoError(t, ad.Save(path, nil))
	back, err := NewAdapter(m, opts)
	require.NoError(t, err)
	defer back.Close()
	require.NoError(t, back.Load(path))
	for _, w := range back.Tensors() {
		got, err := w.F32()
		require.NoError(t, err)
		assert.Equal(t, vals[w.Name()], got, w.Name())
	}
	opts.Alpha = 4
	other, err := NewAdapter(m, opts)
	require.NoError(t, err)
	defer other.Close()
	assert.ErrorContains(t, other.Load(path), "alpha")
}
