package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

// logProbs returns logits whose softmax is probs.
func logProbs(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

func params(mod func(*Params)) Params {
	p := GreedyParams()
	p.Temperature = 1
	mod(&p)
	return p
}

func survivors(t *testing.T, p Params, logits []float32, history []int32) map[int32]float64 {
	t.Helper()
	s := NewSampler(p)
	out := map[int32]float64{}
	total := 0.0
	for _, c := range s.filter(s.penalize(logits, history)) {
		total += c.p
		out[c.id] = c.p
	}
	for id := range out {
		out[id] /= total
	}
	return out
}

func TestValidate(t *testing.T) {
	require.NoError(t, DefaultParams().Validate())
	require.NoError(t, GreedyParams().Validate())
	for name, tc := range map[string]struct {
		mod  func(*Params)
		want string
	}{
		"negative temperature": {func(p *Params) { p.Temperature = -0.1 }, "temperature"},
		"NaN temperature":      {func(p *Params) { p.Temperature = math.NaN() }, "temperature"},
		"negative top-k":       {func(p *Params) { p.TopK = -1 }, "top-k"},
		"zero top-p":           {func(p *Params) { p.TopP = 0 }, "top-p"},
		"top-p above 1":        {func(p *Params) { p.TopP = 1.5 }, "top-p"},
		"negative min-p":       {func(p *Params) { p.MinP = -0.1 }, "min-p"},
		"min-p above 1":        {func(p *Params) { p.MinP = 2 }, "min-p"},
		"zero penalty":         {func(p *Params) { p.RepeatPenalty = 0 }, "repeat penalty"},
		"infinite penalty":     {func(p *Params) { p.RepeatPenalty = math.Inf(1) }, "repeat penalty"},
		"repeat-last-n -2":     {func(p *Params) { p.RepeatLastN = -2 }, "repeat-last-n"},
	} {
		t.Run(name, func(t *testing.T) {
			err := params(tc.mod).Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Panics(t, func() { NewSampler(params(tc.mod)) })
		})
	}
	err := Params{Temperature: -1}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "temperature")
	assert.Contains(t, err.Error(), "top-p")
	assert.Contains(t, err.Error(), "repeat penalty")
}

func TestGreedyIsArgmax(t *testing.T) {
	s := NewSampler(GreedyParams())
	for _, tc := range []struct {
		logits []float32
		want   int32
	}{
		{[]float32{0.1, 0.5, -2, 0.3}, 1},
		{[]float32{1, 3, 3, 2}, 1}, // first of a tie
		{[]float32{-5, -4, -4.5}, 1},
		{[]float32{nan, -1, nan, 2, 2}, 3},
		{[]float32{-inf, -inf, -1}, 2},
		{[]float32{-inf, -inf, -inf}, 0},
		{[]float32{nan, nan}, 0},
		{[]float32{1, inf, inf}, 1},
		{[]float32{7}, 0},
	} {
		assert.Equal(t, tc.want, s.Sample(tc.logits, nil), "%v", tc.logits)
	}
	assert.Equal(t, int32(-1), s.Sample(nil, nil))
}

func TestTopK1IsGreedy(t *testing.T) {
	rows := [][]float32{
		{0.1, 0.5, -2, 0.3},
		{1, 3, 3, 2},
		{nan, -1, nan, 2, 2},
		{-inf, -inf, -1},
		{-inf, -inf, -inf},
		{1, inf, inf},
		{0, 0, 0, 0},
	}
	greedy := NewSampler(GreedyParams())
	for _, temp := range []float64{0.01, 0.5, 1, 2, 100} {
		s := NewSampler(params(func(p *Params) { p.Temperature = temp; p.TopK = 1; p.Seed = 7 }))
		for _, row := range rows {
			for range 20 {
				assert.Equal(t, greedy.Sample(row, nil), s.Sample(row, nil), "temperature %v, %v", temp, row)
			}
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.37) * 3)
	}
	run := func(seed uint64) []int32 {
		s := NewSampler(params(func(p *Params) {
			*p = DefaultParams()
			p.TopK = 100
			p.TopP = 0.98
			p.MinP = 0.01
			p.RepeatPenalty = 1.1
			p.Temperature = 1.2
			p.Seed = seed
		}))
		var hist []int32
		for range 200 {
			hist = append(hist, s.Sample(logits, hist))
		}
		return hist
	}
	a, b := run(42), run(42)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, run(43))
}

func TestDistributionMatchesSoftmax(t *testing.T) {
	logits := []float32{1, 2, 0.5, -1, 3, 0}
	want := make([]float64, len(logits))
	sum := 0.0
	for i, l := range logits {
		want[i] = math.Exp(float64(l))
		sum += want[i]
	}
	for i := range want {
		want[i] /= sum
	}

	const n = 20000
	s := NewSampler(params(func(p *Params) { p.Seed = 1234 }))
	counts := make([]float64, len(logits))
	for range n {
		counts[s.Sample(logits, nil)]++
	}
	chi2 := 0.0
	for i, p := range want {
		e := n * p
		chi2 += (counts[i] - e) * (counts[i] - e) / e
		assert.InDelta(t, p, counts[i]/n, 0.015, "token %d", i)
	}
	// 5 degrees of freedom: P(chi2 > 20.52) = 0.001.
	assert.Less(t, chi2, 20.52)
}

func TestTemperatureSharpens(t *testing.T) {
	logits := []float32{1, 2}
	cold := survivors(t, params(func(p *Params) { p.Temperature = 0.5 }), logits, nil)
	hot := survivors(t, params(func(p *Params) { p.Temperature = 2 }), logits, nil)
	assert.InDelta(t, 1/(1+math.Exp(-2)), cold[1], 1e-9)
	assert.InDelta(t, 1/(1+math.Exp(-0.5)), hot[1], 1e-9)
}

func TestTopP(t *testing.T) {
	logits := logProbs(0.5, 0.25, 0.15, 0.1)
	// Cumulative: 0.5, 0.75, 0.9, 1.0.
	for _, tc := range []struct {
		topP float64
		want map[int32]float64
	}{
		{0.4, map[int32]float64{0: 1}},
		{0.7, map[int32]float64{0: 0.5 / 0.75, 1: 0.25 / 0.75}},
		{0.8, map[int32]float64{0: 0.5 / 0.9, 1: 0.25 / 0.9, 2: 0.15 / 0.9}},
		{0.95, map[int32]float64{0: 0.5, 1: 0.25, 2: 0.15, 3: 0.1}},
	} {
		got := survivors(t, params(func(p *Params) { p.TopP = tc.topP }), logits, nil)
		require.Len(t, got, len(tc.want), "top-p %v", tc.topP)
		for id, p := range tc.want {
			assert.InDelta(t, p, got[id], 1e-6, "top-p %v token %d", tc.topP, id)
		}
	}

	// Top-k runs first and renormalises: with k=3 the probabilities become
	// 0.5/0.9, 0.25/0.9, 0.15/0.9 and 0.556+0.278 already reaches 0.8.
	got := survivors(t, params(func(p *Params) { p.TopK = 3; p.TopP = 0.8 }), logits, nil)
	assert.Len(t, got, 2)
	assert.Contains(t, got, int32(0))
	assert.Contains(t, got, int32(1))

	// The draws stay within the nucleus.
	s := NewSampler(params(func(p *Params) { p.TopP = 0.7; p.Seed = 3 }))
	seen := map[int32]int{}
	for range 2000 {
		seen[s.Sample(logits, nil)]++
	}
	assert.Len(t, seen, 2)
	assert.Positive(t, seen[0])
	assert.Positive(t, seen[1])
}

func TestMinP(t *testing.T) {
	logits := logProbs(0.5, 0.25, 0.15, 0.1)
	for _, tc := range []struct {
		minP float64
		want []int32
	}{
		{0.1, []int32{0, 1, 2, 3}}, // threshold 0.05
		{0.25, []int32{0, 1, 2}},   // threshold 0.125
		{0.4, []int32{0, 1}},       // threshold 0.2
		{0.6, []int32{0}},          // threshold 0.3
		{1, []int32{0}},
	} {
		got := survivors(t, params(func(p *Params) { p.MinP = tc.minP }), logits, nil)
		require.Len(t, got, len(tc.want), "min-p %v", tc.minP)
		for _, id := range tc.want {
			assert.Contains(t, got, id, "min-p %v", tc.minP)
		}
	}
	// Order: top-p first keeps {0, 1, 2}, min-p 0.4 then drops 2.
	got := survivors(t, params(func(p *Params) { p.TopP = 0.8; p.MinP = 0.4 }), logits, nil)
	assert.Len(t, got, 2)
}

func TestTopKKeepsBest(t *testing.T) {
	logits := []float32{0.3, 2, -1, 2, 5, 0.1, 4}
	got := survivors(t, params(func(p *Params) { p.TopK = 3 }), logits, nil)
	assert.Len(t, got, 3)
	for _, id := range []int32{4, 6, 1} { // 2 at index 1 beats the tie at 3
		assert.Contains(t, got, id)
	}
	assert.Len(t, survivors(t, params(func(p *Params) { p.TopK = 100 }), logits, nil), len(logits))
}

func TestRepeatPenalty(t *testing.T) {
	logits := []float32{2.0, 1.9, -1, -1.5}
	pen := func(mod func(*Params)) *Sampler {
		p := GreedyParams()
		p.RepeatPenalty = 1.1
		p.RepeatLastN = 64
		if mod != nil {
			mod(&p)
		}
		return NewSampler(p)
	}
	// 2.0 / 1.1 = 1.82 < 1.9: the argmax moves from 0 to 1.
	assert.Equal(t, int32(0), NewSampler(GreedyParams()).Sample(logits, []int32{0}))
	assert.Equal(t, int32(1), pen(nil).Sample(logits, []int32{0}))
	assert.Equal(t, float32(2.0), logits[0], "input not modified")

	// Negative logits are multiplied: -1 * 1.1 = -1.1 < -1.05.
	neg := []float32{-1.0, -1.05}
	assert.Equal(t, int32(0), NewSampler(GreedyParams()).Sample(neg, []int32{0}))
	assert.Equal(t, int32(1), pen(nil).Sample(neg, []int32{0}))

	// Only the last RepeatLastN tokens count; 0 turns the penalty off; -1
	// uses the whole history.
	hist := []int32{0, 2, 3}
	assert.Equal(t, int32(0), pen(func(p *Params) { p.RepeatLastN = 2 }).Sample(logits, hist))
	assert.Equal(t, int32(1), pen(func(p *Params) { p.RepeatLastN = 3 }).Sample(logits, hist))
	assert.Equal(t, int32(0), pen(func(p *Params) { p.RepeatLastN = 0 }).Sample(logits, hist))
	assert.Equal(t, int32(1), pen(func(p *Params) { p.RepeatLastN = -1 }).Sample(logits, hist))

	// Each distinct token is penalised once, however often it occurs;
	// out-of-range ids are ignored.
	s := pen(nil)
	w := s.penalize(logits, []int32{0, 0, 0, 2, 2, -5, 99})
	assert.InDelta(t, 2.0/1.1, w[0], 1e-6)
	assert.InDelta(t, 1.9, w[1], 1e-6)
	assert.InDelta(t, -1.1, w[2], 1e-6)
	assert.InDelta(t, -1.5, w[3], 1e-6)
}

// TestFrequencyPresencePenalties checks OpenAI's penalties against a direct computation on
// random rows and histories (with the repetition penalty before them, as llama.cpp applies
// them), and that they move a greedy choice the way their sign says.
func TestFrequencyPresencePenalties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 3))
	for range 200 {
		p := GreedyParams()
		p.RepeatPenalty = 1 + rng.Float64()
		p.RepeatLastN = []int{-1, 0, 3, 16}[rng.IntN(4)]
		p.FrequencyPenalty = 4*rng.Float64() - 2
		p.PresencePenalty = 4*rng.Float64() - 2
		logits := make([]float32, 1+rng.IntN(30))
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 3)
		}
		history := make([]int32, rng.IntN(40))
		for i := range history {
			history[i] = int32(rng.IntN(len(logits)+2)) - 1 // some outside the vocabulary
		}
		want := slices.Clone(logits)
		window := history
		if n := p.RepeatLastN; n >= 0 && n < len(window) {
			window = window[len(window)-n:]
		}
		count := map[int32]int{}
		for _, tok := range window {
			if tok >= 0 && int(tok) < len(want) {
				count[tok]++
			}
		}
		for tok, c := range count {
			if want[tok] > 0 {
				want[tok] /= float32(p.RepeatPenalty)
			} else {
				want[tok] *= float32(p.RepeatPenalty)
			}
			want[tok] -= float32(c)*float32(p.FrequencyPenalty) + float32(p.PresencePenalty)
		}
		require.Equal(t, want, NewSampler(p).penalize(logits, history), "%+v, history %v", p, history)
	}

	logits := []float32{2, 1.5, 0}
	greedy := func(freq, pres float64) int32 {
		p := GreedyParams()
		p.RepeatLastN, p.FrequencyPenalty, p.PresencePenalty = 64, freq, pres
		return NewSampler(p).Sample(logits, []int32{0, 0, 0})
	}
	assert.Equal(t, int32(0), greedy(0, 0))
	assert.Equal(t, int32(1), greedy(0.2, 0), "2 - 3·0.2 = 1.4 < 1.5")
	assert.Equal(t, int32(0), greedy(0.1, 0), "2 - 3·0.1 = 1.7")
	assert.Equal(t, int32(1), greedy(0, 0.6), "2 - 0.6 = 1.4, however often the token occurred")
	assert.Equal(t, int32(0), greedy(-1, 0), "a negative penalty favours repeats")
	assert.Error(t, (Params{TopP: 1, RepeatPenalty: 1, FrequencyPenalty: 2.5}).Validate())
	assert.Error(t, (Params{TopP: 1, RepeatPenalty: 1, PresencePenalty: math.NaN()}).Validate())
}

// TestArgmaxMatchesScan checks argmax's four running maxima against a plain scan (the first
// index of the largest value, NaN skipped, 0 when all are NaN) on random rows of every length
// up to 41 from a few values, so that ties, NaN and infinities fall in every lane and the tail.
func TestArgmaxMatchesScan(t *testing.T) {
	scan := func(w []float32) int32 {
		best := -1
		for i, v := range w {
			if v == v && (best < 0 || v > w[best]) {
				best = i
			}
		}
		return int32(max(best, 0))
	}
	values := []float32{nan, -inf, inf, -1, 0, 1, 2}
	rng := rand.New(rand.NewPCG(4, 7))
	for range 20000 {
		w := make([]float32, 1+rng.IntN(41))
		for i := range w {
			w[i] = values[rng.IntN(len(values))]
		}
		require.Equal(t, scan(w), argmax(w), "%v", w)
	}
}

func TestNonFiniteLogits(t *testing.T) {
	s := NewSampler(params(func(p *Params) { p.Temperature = 5; p.Seed = 9 }))
	for range 1000 {
		assert.Equal(t, int32(2), s.Sample([]float32{nan, -inf, 1, nan, -inf}, nil))
	}
	for range 100 {
		assert.Equal(t, int32(0), s.Sample([]float32{-inf, -inf, nan}, nil))
	}
	seen := map[int32]int{}
	for range 1000 {
		seen[s.Sample([]float32{inf, 100, inf, nan}, nil)]++
	}
	assert.Len(t, seen, 2)
	assert.Positive(t, seen[0])
	assert.Positive(t, seen[2])

	// A tiny temperature does not overflow into NaN.
	cold := NewSampler(params(func(p *Params) { p.Temperature = 1e-300 }))
	for range 100 {
		assert.Equal(t, int32(1), cold.Sample([]float32{30, 31, -30}, nil))
	}
}

func BenchmarkSampleDefault(b *testing.B) {
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.123) * 8)
	}
	s := NewSampler(DefaultParams())
	hist := make([]int32, 64)
	for b.Loop() {
		s.Sample(logits, hist)
	}
}

// TestProbs checks the distribution speculative decoding compares: normalised, zero for the
// filtered tokens, one-hot when greedy, and what Draw draws from.
func TestProbs(t *testing.T) {
	logits := []float32{1, 3, 2, -1, 0.5}
	s := NewSampler(Params{Temperature: 1, TopK: 3, TopP: 1, RepeatPenalty: 1, Seed: 1})
	p := s.Probs(logits, nil, nil)
	sum := 0.0
	for _, v := range p {
		sum += v
	}
	if math.Abs(sum-1) > 1e-12 || p[3] != 0 || p[4] != 0 || !(p[1] > p[2] && p[2] > p[0] && p[0] > 0) {
		t.Fatalf("top-3 probs %v", p)
	}
	g := NewSampler(GreedyParams()).Probs(logits, nil, p)
	if g[1] != 1 || g[0]+g[2]+g[3]+g[4] != 0 {
		t.Fatalf("greedy probs %v", g)
	}
	counts := make([]int, 3)
	for i := 0; i < 3000; i++ {
		counts[s.Draw([]float64{0.2, 0, 0.8})]++
	}
	if counts[1] != 0 || counts[0] < 500 || counts[0] > 700 {
		t.Fatalf("draws %v of weights 0.2, 0, 0.8", counts)
	}
	if s.Draw([]float64{0, 0}) != -1 {
		t.Fatal("all-zero weights: want -1")
	}
}

// TestTopPHeapMatchesSort checks top-p's heap against the plain definition it replaces: sort
// every candidate best first (ties by id) and keep the prefix whose probabilities reach p.
func TestTopPHeapMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		n := 1 + rng.IntN(300)
		cand := make([]candidate, n)
		sum := 0.0
		for i := range cand {
			// Few distinct logits, so that ties (broken by id) are common.
			l := float64(rng.IntN(8)) * rng.Float64() * 4
			if trial%2 == 0 {
				l = math.Round(l)
			}
			cand[i] = candidate{id: int32(i), logit: l, p: math.Exp(l)}
			sum += cand[i].p
		}
		for i := range cand {
			cand[i].p /= sum
		}
		p := []float64{0, 0.1, 0.5, 0.9, 0.999, 1.5}[trial%6]
		want := slices.Clone(cand)
		slices.SortFunc(want, cmpCandidates)
		want = want[:topPCount(want, p)]
		s := NewSampler(Params{Temperature: 1, TopP: 0.5, RepeatPenalty: 1})
		s.p.TopP = p // out of Validate's range too: the plain definition still holds
		got := s.topP(slices.Clone(cand))
		require.Equal(t, want, got, "trial %d, p %g", trial, p)
	}
}
