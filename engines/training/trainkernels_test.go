package training

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

// builtinTrainKernels is what a training graph on be resolves with the build's own cpu table
// for products over weights of type w (as trainable.ownKernels does for a model of them).
func builtinTrainKernels(be *ggml.Backend, w ggml.Type) decoding.KernelSet {
	s := decoding.KernelSet{}
	if !be.IsCPU() || !ggml.CPUKernelsFast() {
		return s
	}
	needs := []kernelrt.Need{decoding.NeedPacked(ggml.F32), decoding.NeedPacked(w), decoding.NeedSoftMax, needCont, needSwigluBack}
	for _, n := range kernelrt.Builtin(kernelrt.BuildTarget(kernels.BackendCPU), needs) {
		s[n] = true
	}
	return s
}

// TestTrainKernelsLookups trains a LLaMA and a GPT-2 model big enough for toy's packed GEMM
// (64 rows, 64 tokens) four steps and evaluates them, three ways: as a Trainer made of the
// model itself (the build's table resolves its lookups), through WithKernels with every lookup
// TrainNeeds lists resolved, and through WithKernels with none. The first two are the same to
// the bit; the third runs ggml's operations and so computes other bits of the same losses.
func TestTrainKernelsLookups(t *testing.T) {
	if !ggml.CPUKernelsFast() {
		t.Skip("toy's CPU kernels are compiled scalar in this build: training looks nothing up")
	}
	// The three runs compare bits: hold the thread count (a loaded machine, as CI's packages side
	// by side, had the backend run one of them on fewer threads, which sums in another order).
	ggml.AdaptThreads = false
	defer func() { ggml.AdaptThreads = true }()
	be := newBackend(t)
	for _, family := range []string{transformer.Arch, transformer.GPT2Arch} {
		t.Run(family, func(t *testing.T) {
			newModel := func() *Model {
				var m *Model
				var err error
				if family == transformer.GPT2Arch {
					g := config.DefaultGpt2()
					g.Vocab, g.DModel, g.DFF, g.NHeads, g.NLayers, g.Context, g.Seed = 96, 64, 128, 2, 2, 64, 3
					m, err = NewGPT2(g, be)
				} else {
					c := tinyConfig(t, false, false)
					c.Vocab, c.DModel, c.DFF, c.NHeads, c.NKVHeads, c.NLayers, c.Context, c.InitScale = 96, 64, 128, 2, 1, 2, 64, 0.1
					m, err = New(c, be)
				}
				require.NoError(t, err)
				require.NoError(t, m.Init())
				t.Cleanup(func() { m.Close() })
				return m
			}
			needs := TrainNeeds(newModel())
			assert.Contains(t, needs, decoding.NeedPacked(ggml.F32))
			assert.Contains(t, needs, decoding.NeedSoftMax)
			assert.Contains(t, needs, needCont)
			if family == transformer.GPT2Arch {
				assert.NotContains(t, needs, needSwigluBack, "GPT-2's feed-forward is GELU")
			} else {
				assert.Contains(t, needs, needSwigluBack)
			}
			batch := randomSeqs(rand.New(rand.NewPCG(5, 5)), 2, 64, 96)
			losses := func(wrap func(Trainable) Trainable) []float32 {
				m := newModel()
				tr, err := NewTrainer(wrap(m), 64, 2)
				require.NoError(t, err)
				defer tr.Close()
				p := [7]float32{1e-2, 0.9, 0.95, 1e-8, 0.1, 0, 0}
				var out []float32
				for step := 0; step < 4; step++ {
					p[5], p[6] = float32(1/(1-math.Pow(0.9, float64(step+1)))), float32(1/(1-math.Pow(0.95, float64(step+1))))
					loss, err := tr.Step(batch, p, p)
					require.NoError(t, err)
					out = append(out, loss)
				}
				ev, err := NewEvaluator(wrap(m), 64, 2)
				require.NoError(t, err)
				defer ev.Close()
				l, err := ev.Loss(batch)
				require.NoError(t, err)
				return append(out, l)
			}
			plain := losses(func(m Trainable) Trainable { return m })
			all := losses(func(m Trainable) Trainable { return WithKernels(m, TrainNeeds(m)) })
			none := losses(func(m Trainable) Trainable { return WithKernels(m, nil) })
			assert.Equal(t, plain, all, "every lookup resolved runs what the build's table resolves")
			assert.NotEqual(t, plain, none, "without the lookups ggml's operations run")
			assert.InDeltaSlice(t, plain, none, 2e-3, "ggml's operations compute the same model")
			assert.Less(t, plain[3], plain[0])
		})
	}
}
