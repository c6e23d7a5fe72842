package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/kernelrt"
)

func TestDeviceSampling(t *testing.T) {
	greedy, drawn := kernelrt.Dispatch{Argmax: true}, kernelrt.Dispatch{Sample: true}
	for _, c := range []struct {
		p    sample.Params
		want kernelrt.Dispatch
	}{
		{sample.GreedyParams(), greedy},
		{sample.Params{Temperature: 0, TopK: 40, TopP: 0.9, MinP: 0.1, RepeatPenalty: 1}, greedy},
		{sample.Params{Temperature: 0.8, TopP: 1, RepeatPenalty: 1}, drawn},
		{sample.Params{Temperature: 0.8, TopK: 40, TopP: 1, RepeatPenalty: 1}, drawn},
		{sample.Params{Temperature: 0.8, TopP: 0.9, RepeatPenalty: 1}, drawn},
		{sample.Params{Temperature: 0.8, TopP: 0.9, RepeatPenalty: 1.1, RepeatLastN: 0}, drawn},
		{sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.9, RepeatPenalty: 1}, kernelrt.Dispatch{}},
		{sample.DefaultParams(), kernelrt.Dispatch{}}, // min-p 0.05
		{sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1.1, RepeatLastN: 64}, kernelrt.Dispatch{}},
		// The OpenAI penalties and the logit bias change logits the kernels do not see.
		{sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64, FrequencyPenalty: 0.5}, kernelrt.Dispatch{}},
		{sample.Params{Temperature: 0.8, TopP: 0.9, RepeatPenalty: 1, RepeatLastN: 64, PresencePenalty: -1}, kernelrt.Dispatch{}},
		{sample.Params{Temperature: 0.8, TopP: 0.9, RepeatPenalty: 1, RepeatLastN: 0, PresencePenalty: -1}, drawn},
		{sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1, LogitBias: map[int32]float64{7: -100}}, kernelrt.Dispatch{}},
	} {
		assert.Equal(t, c.want, DeviceSampling(c.p), "%+v", c.p)
	}
}

// TestTokenSampler samples on the device from logits ggml's CUDA backend holds, in place, and
// compares every token with the host sampler's draw from the same distribution with the same
// generator (sample.Sampler.Draw of Probs): greedy, temperature alone, top-k, top-p. A draw
// whose uniform number lies within 1e-5 of a boundary between two tokens is left out (float32
// on the device, float64 on the host). It needs a GPU and ggml's CUDA backend library.
func TestTokenSampler(t *testing.T) {
	d := openOrSkip(t)
	be, err := ggml.NewBackend(1)
	if err != nil {
		t.Skipf("no ggml CUDA backend: %v", err)
	}
	defer be.Close()
	const n = 2000
	ctx, err := ggml.NewContext(ggml.ContextOptions{MaxTensors: 1})
	require.NoError(t, err)
	defer ctx.Close()
	lt := ctx.NewTensor(ggml.F32, n)
	buf, err := be.Alloc(ctx)
	require.NoError(t, err)
	defer buf.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	checked, skipped := 0, 0
	for _, p := range []sample.Params{
		sample.GreedyParams(),
		{Temperature: 0.7, TopP: 1, RepeatPenalty: 1, Seed: 1},
		{Temperature: 1.3, TopK: 25, TopP: 1, RepeatPenalty: 1, Seed: 2},
		{Temperature: 0.9, TopP: 0.8, RepeatPenalty: 1, Seed: 3},
	} {
		dev, host := sample.NewSampler(p), sample.NewSampler(p)
		ts, err := d.NewTokenSampler(nil, dev)
		require.NoError(t, err)
		for step := 0; step < 50; step++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(3 * rng.NormFloat64())
			}
			require.NoError(t, lt.SetF32(x))
			got, err := ts.Sample(lt)
			require.NoError(t, err)
			probs := host.Probs(x, nil, nil)
			if p.Temperature == 0 {
				assert.Equal(t, host.Draw(probs), got)
				checked++
				continue
			}
			u := host.Uniform()
			want, margin := inverseCDF(probs, u)
			if margin < 1e-5 {
				skipped++
				continue
			}
			assert.Equal(t, want, got, "%+v step %d", p, step)
			checked++
		}
	}
	t.Logf("gpu-check: token sampler: %d draws compared with the host sampler, %d near a boundary", checked, skipped)
	assert.Greater(t, checked, 150)
}

// inverseCDF is sample.Sampler.Draw with the uniform number u given: the first token in index
// order whose cumulative probability passes u, with the distance of u from the nearest
// cumulative boundary.
func inverseCDF(p []float64, u float64) (int32, float64) {
	acc, margin := 0.0, math.Inf(1)
	for i, w := range p {
		if w <= 0 {
			continue
		}
		margin = math.Min(margin, math.Abs(acc-u))
		acc += w
		if acc > u {
			return int32(i), math.Min(margin, acc-u)
		}
	}
	return -1, 0
}
