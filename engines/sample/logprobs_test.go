package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLogprobs is the tests' float64 reference of the distribution KeepLogprobs documents: the
// logits after the logit bias and the penalties (adjustedRef), masked by allow (nil: all
// allowed); at temperature 0 their log-softmax at temperature 1; otherwise top-k, softmax at
// the temperature, top-p and min-p, renormalised over the survivors. near reports a top-p cut
// within rounding of the boundary (where float rounding may keep one token more or less).
func refLogprobs(p Params, logits []float32, history []int32, allow allowSet) (lp map[int32]float64, near bool) {
	w := adjustedRef(p, logits, history)
	for i := range w {
		if w[i] != w[i] || allow != nil && !allow[int32(i)] {
			w[i] = float32(math.Inf(-1))
		}
	}
	toks := finiteBestFirst(w)
	lp = map[int32]float64{}
	if len(toks) == 0 {
		return lp, false
	}
	if p.Temperature == 0 {
		sum := 0.0
		for _, k := range toks {
			sum += math.Exp(k.logit - toks[0].logit)
		}
		for _, k := range toks {
			lp[k.id] = k.logit - toks[0].logit - math.Log(sum)
		}
		return lp, false
	}
	if p.TopK > 0 && p.TopK < len(toks) {
		toks = toks[:p.TopK]
	}
	probs := make([]float64, len(toks))
	sum := 0.0
	for i, k := range toks {
		probs[i] = math.Exp((k.logit - toks[0].logit) / p.Temperature)
		sum += probs[i]
	}
	cum, cut := 0.0, len(toks)
	for i := range probs {
		probs[i] /= sum
		if p.TopP < 1 && cut == len(toks) {
			near = near || math.Abs(cum+probs[i]-p.TopP) < 1e-9
			if cum += probs[i]; cum >= p.TopP {
				cut = i + 1
			}
		}
	}
	kept := 0.0
	for i := range cut {
		if probs[i] >= p.MinP*probs[0] && probs[i] > 1e-300 {
			kept += probs[i]
			lp[toks[i].id] = probs[i]
		}
	}
	for id, q := range lp {
		lp[id] = math.Log(q / kept)
	}
	return lp, near
}

// TestKeepLogprobs: a sampler that keeps log-probabilities draws the same tokens as one that
// does not (same seed, same rows), and what it records — the drawn token's log-probability
// and the top ones, best first — equals the float64 reference of the documented distribution,
// on random rows with every part of the chain (bias, penalties, a constraint, top-k, top-p,
// min-p), greedy and sampled.
func TestKeepLogprobs(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	checked := 0
	for trial := range 600 {
		n := 2 + rng.IntN(400)
		p := Params{Temperature: []float64{0, 0.3, 0.8, 1.5}[rng.IntN(4)], TopK: []int{0, 1, 5, 40}[rng.IntN(4)],
			TopP: []float64{1, 0.9, 0.5}[rng.IntN(3)], MinP: []float64{0, 0.05}[rng.IntN(2)], RepeatPenalty: 1, RepeatLastN: 64,
			Seed: rng.Uint64()}
		if trial%3 == 1 {
			p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = 1.3, 0.5, 0.2
			p.LogitBias = map[int32]float64{int32(rng.IntN(n)): 5, int32(rng.IntN(n)): -100}
		}
		var allow allowSet
		if trial%4 == 2 {
			allow = allowSet{}
			for range 1 + rng.IntN(n) {
				allow[int32(rng.IntN(n))] = true
			}
		}
		top := rng.IntN(MaxTopLogprobs + 1)
		plain, kept := NewSampler(p), NewSampler(p)
		kept.KeepLogprobs(top)
		if allow != nil {
			plain.Constrain(allow)
			kept.Constrain(allow)
		}
		var history []int32
		for step := range 4 {
			logits := randomRow(rng, n, 0, 0.01, 0, func() float32 { return float32(rng.NormFloat64() * 3) })
			want, near := refLogprobs(p, logits, history, allow)
			tp, tk := plain.Sample(logits, history), kept.Sample(logits, history)
			require.Equal(t, tp, tk, "trial %d step %d: keeping log-probabilities changed the draw", trial, step)
			got, ok := kept.LastLogprobs()
			require.True(t, ok)
			require.Equal(t, tk, got.Token)
			if !near && len(want) > 0 {
				require.Contains(t, want, tk, "trial %d step %d: drawn token outside the reference's survivors", trial, step)
				assert.InDelta(t, want[tk], got.Logprob, 1e-9, "trial %d step %d: drawn token's log-probability", trial, step)
				ref := make([]TokenLogprob, 0, len(want))
				for id, lp := range want {
					ref = append(ref, TokenLogprob{id, lp})
				}
				slices.SortFunc(ref, func(a, b TokenLogprob) int {
					if a.Logprob != b.Logprob {
						if a.Logprob > b.Logprob {
							return -1
						}
						return 1
					}
					return int(a.Token - b.Token)
				})
				// The sampler drops tokens below e^-64 of the best as negligible (nucleus) where
				// top-k does not cut: compare the tokens above e^-50 only.
				ref = slices.DeleteFunc(ref, func(x TokenLogprob) bool { return x.Logprob < ref[0].Logprob-50 })
				gotTop := slices.DeleteFunc(slices.Clone(got.Top), func(x TokenLogprob) bool { return x.Logprob < ref[0].Logprob-50 })
				require.Len(t, gotTop, min(top, len(ref)), "trial %d step %d", trial, step)
				for i, g := range gotTop {
					assert.InDelta(t, ref[i].Logprob, g.Logprob, 1e-9, "trial %d step %d: top %d", trial, step, i)
					if math.Abs(ref[i].Logprob-g.Logprob) > 1e-9 || i+1 < len(ref) && ref[i+1].Logprob == ref[i].Logprob || i > 0 && ref[i-1].Logprob == ref[i].Logprob {
						continue // a tie: either order of equal log-probabilities is right up to rounding
					}
					assert.Equal(t, ref[i].Token, g.Token, "trial %d step %d: top %d", trial, step, i)
				}
				checked++
			}
			history = append(history, tk)
		}
	}
	assert.Greater(t, checked, 2000)
	s := NewSampler(GreedyParams())
	s.Sample([]float32{1, 2}, nil)
	_, ok := s.LastLogprobs()
	assert.False(t, ok, "off by default")
}
