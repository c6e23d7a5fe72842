package sample

import (
	"fmt"
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
// adjustedRef is the tests' plain reference of the logits the filters see: the logit bias of
// p added to its tokens within the row, then each distinct token of the last RepeatLastN of
// history (all with -1; ids outside the row skipped) divided by RepeatPenalty (multiplied when
// negative) and lowered by count·FrequencyPenalty + PresencePenalty.
func adjustedRef(p Params, logits []float32, history []int32) []float32 {
	want := slices.Clone(logits)
	for tok, b := range p.LogitBias {
		if int(tok) < len(want) {
			want[tok] += float32(b)
		}
	}
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
	return want
}

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
		require.Equal(t, adjustedRef(p, logits, history), NewSampler(p).penalize(logits, history), "%+v, history %v", p, history)
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

// TestLogitBias checks the logit bias against a plain reference on random rows (adjustedRef:
// the bias added to its tokens' logits, ids past the row ignored, then the penalties), and what it does
// to greedy decoding and to the distribution a sampler draws from.
func TestLogitBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for range 200 {
		p := GreedyParams()
		p.RepeatPenalty = 1 + rng.Float64()
		p.RepeatLastN = []int{0, -1, 8}[rng.IntN(3)]
		p.FrequencyPenalty = 4*rng.Float64() - 2
		logits := make([]float32, 1+rng.IntN(30))
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 3)
		}
		p.LogitBias = map[int32]float64{}
		for range rng.IntN(5) {
			p.LogitBias[int32(rng.IntN(len(logits)+3))] = 200*rng.Float64() - 100 // some past the row
		}
		history := make([]int32, rng.IntN(20))
		for i := range history {
			history[i] = int32(rng.IntN(len(logits)))
		}
		require.Equal(t, adjustedRef(p, logits, history), NewSampler(p).penalize(logits, history), "%+v, history %v", p, history)
	}

	logits := []float32{3, 1, 0, -2}
	biased := func(temp float64, bias map[int32]float64) *Sampler {
		p := GreedyParams()
		p.Temperature, p.LogitBias = temp, bias
		return NewSampler(p)
	}
	assert.Equal(t, int32(0), biased(0, nil).Sample(logits, nil))
	assert.False(t, biased(0, map[int32]float64{3: 6}).Greedy(), "a bias is not a plain argmax")
	assert.Equal(t, int32(3), biased(0, map[int32]float64{3: 6}).Sample(logits, nil), "-2 + 6 = 4 > 3")
	assert.Equal(t, int32(1), biased(0, map[int32]float64{0: -100}).Sample(logits, nil), "token 0 banned")
	assert.Equal(t, int32(0), biased(0, map[int32]float64{9: 100}).Sample(logits, nil), "a token past the row is ignored")
	// A draw follows the biased softmax: token 2 with bias ln 4 weighs 4·e^0 against e^3, e^1, e^-2.
	probs := biased(1, map[int32]float64{2: math.Log(4)}).Probs(logits, nil, nil)
	z := math.Exp(3) + math.Exp(1) + 4 + math.Exp(-2)
	for i, want := range []float64{math.Exp(3) / z, math.Exp(1) / z, 4 / z, math.Exp(-2) / z} {
		assert.InDelta(t, want, probs[i], 1e-6, "token %d", i)
	}
	banned := biased(1, map[int32]float64{0: -100})
	for range 200 {
		require.NotEqual(t, int32(0), banned.Sample(logits, nil), "a banned token is never drawn")
	}
	assert.Equal(t, "temperature 0, top-k 0, top-p 1, min-p 0, repeat penalty 1 (last 0), frequency penalty 0, presence penalty 0, seed 0, logit bias on 1 token",
		biased(0, map[int32]float64{3: 6}).Params().String())
	assert.NotContains(t, GreedyParams().String(), "logit bias")
	assert.Error(t, (Params{TopP: 1, RepeatPenalty: 1, LogitBias: map[int32]float64{-1: 1}}).Validate())
	assert.Error(t, (Params{TopP: 1, RepeatPenalty: 1, LogitBias: map[int32]float64{4: math.Inf(1)}}).Validate())
	assert.NoError(t, (Params{TopP: 1, RepeatPenalty: 1, LogitBias: map[int32]float64{4: -100}}).Validate())
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

// BenchmarkSample times one draw from a row of SmolLM2's vocabulary (49152) and of Qwen's
// (151936) with llama.cpp's default preset (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8)
// and with SmolLM2's (no top-k, top-p 0.9, temperature 0.2: the kernel table's default for
// smollm2), on logits of a trained model's shape (a few large, the rest normal) and on those of
// random weights (normal: top-p keeps most of the vocabulary).
func BenchmarkSample(b *testing.B) {
	presets := map[string]Params{
		"llama.cpp": DefaultParams(),
		"smollm2":   {Temperature: 0.2, TopP: 0.9, RepeatPenalty: 1},
	}
	for _, name := range []string{"llama.cpp", "smollm2"} {
		for _, rows := range []string{"trained", "random"} {
			for _, vocab := range []int{49152, 151936} {
				b.Run(fmt.Sprintf("%s/%s/vocab=%d", name, rows, vocab), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, uint64(vocab)))
					logits := make([]float32, vocab)
					for i := range logits {
						logits[i] = float32(rng.NormFloat64())
						if rows == "trained" {
							logits[i] = 2*logits[i] - 4
						}
					}
					if rows == "trained" {
						for range 20 {
							logits[rng.IntN(vocab)] = float32(8 + 4*rng.Float64())
						}
					}
					s := NewSampler(presets[name])
					hist := make([]int32, 64)
					for b.Loop() {
						s.Sample(logits, hist)
					}
				})
			}
		}
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

// TestNucleusMatchesReference checks sampling without top-k (nucleus: softmax over every token,
// top-p by buckets of the logit, min-p) against a float64 reference that sorts every finite
// logit: random rows of up to 3000 tokens, with ties, -Inf and NaN, temperatures from 0.05
// (most tokens negligible) to 2, with and without penalties. The survivors must be the
// reference's (bar those below 1e-25 of the most likely, which nucleus drops) with the same
// probabilities; Probs must give them.
func TestNucleusMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for trial := range 2000 {
		n := 1 + rng.IntN(3000)
		if trial%3 == 0 {
			n = 1 + rng.IntN(80) // around sort-everything's limit
		}
		scale := []float64{0.5, 2, 8}[rng.IntN(3)]
		logits := randomRow(rng, n, 0.02, 0.03, 0, func() float32 {
			v := rng.NormFloat64() * scale
			if trial%2 == 0 {
				v = math.Round(v) // ties
			}
			return float32(v)
		})
		p := Params{Temperature: []float64{0.05, 0.2, 0.8, 2}[rng.IntN(4)], TopK: []int{0, n, n + 5}[rng.IntN(3)],
			TopP: []float64{1, 0.99, 0.9, 0.5, 0.1}[rng.IntN(5)], MinP: []float64{0, 0.05}[rng.IntN(2)], RepeatPenalty: 1, RepeatLastN: 64}
		var history []int32
		if trial%4 == 1 {
			p.RepeatPenalty, p.PresencePenalty = 1.5, 1
			for range rng.IntN(30) {
				history = append(history, int32(rng.IntN(n)))
			}
		}
		s := NewSampler(p)
		w := slices.Clone(s.penalize(logits, history))

		// The reference.
		toks := finiteBestFirst(w)
		if len(toks) == 0 {
			assert.Empty(t, s.filter(w), "trial %d: every logit -Inf", trial)
			continue
		}
		probs := make([]float64, len(toks))
		sum := 0.0
		for i, k := range toks {
			probs[i] = math.Exp((k.logit - toks[0].logit) / p.Temperature)
			sum += probs[i]
		}
		cum, cut, near := 0.0, len(toks), false
		for i := range probs {
			probs[i] /= sum
			if p.TopP < 1 && cut == len(toks) {
				near = near || math.Abs(cum+probs[i]-p.TopP) < 1e-9
				if cum += probs[i]; cum >= p.TopP {
					cut = i + 1
				}
			}
		}
		want := map[int32]float64{}
		for i := range cut {
			if probs[i] >= p.MinP*probs[0] {
				want[toks[i].id] = probs[i]
			}
		}

		got := map[int32]float64{}
		for _, c := range s.filter(w) {
			got[c.id] = c.p
		}
		dist := s.Probs(logits, history, nil)
		for id, pw := range want {
			pg, ok := got[id]
			if !ok {
				require.True(t, near || pw < 1e-25, "trial %d: token %d (p %g) missing", trial, id, pw)
				continue
			}
			require.InDelta(t, pw, pg, 1e-12, "trial %d: token %d", trial, id)
		}
		for id := range got {
			_, ok := want[id]
			require.True(t, ok || near, "trial %d: token %d should be filtered out", trial, id)
		}
		total := 0.0
		for _, pg := range got {
			total += pg
		}
		for id, pg := range got {
			require.InDelta(t, pg/total, dist[id], 1e-12, "trial %d: Probs of token %d", trial, id)
		}
		if !near {
			checked++
		}
	}
	assert.Greater(t, checked, 1800, "rows compared away from a top-p boundary")
}

// TestTopKScanMatchesSort checks the one-pass top-k against a full sort of the finite logits
// (best first, ties to the lower id), on random rows with many ties, NaN, -Inf and now and then
// +Inf, with and without penalties, k from 1 past the row's length; and that Sample's and
// Probs's candidates, taken from the row itself where no penalty applies (NaN in it), are
// those filter gives on penalize's copy (NaN mapped to -Inf).
func TestTopKScanMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 3000 {
		n := 1 + rng.IntN(300)
		levels := 1 + rng.IntN(12) // few distinct values: ties everywhere
		posInfRate := 0.0
		if trial%5 == 0 {
			posInfRate = 0.002
		}
		logits := randomRow(rng, n, 0.05, 0.1, posInfRate, func() float32 { return float32(rng.IntN(levels)) - 4 })
		var history []int32
		p := DefaultParams()
		p.TopK = 1 + rng.IntN(n+2)
		p.TopP = []float64{1, 0.95, 0.5}[rng.IntN(3)]
		p.MinP = []float64{0, 0.05}[rng.IntN(2)]
		if trial%2 == 1 {
			p.RepeatPenalty, p.FrequencyPenalty = 1.3, 0.5
			for range rng.IntN(20) {
				history = append(history, int32(rng.IntN(n)))
			}
		}
		s := NewSampler(p)
		w := s.penalize(logits, history)
		want := finiteBestFirst(w)
		scan, ok := s.topKScan(w)
		posInf := slices.Contains(w, inf)
		require.Equal(t, !posInf && p.TopK < len(want), ok, "trial %d: top-k %d of %d finite logits, +Inf %v", trial, p.TopK, len(want), posInf)
		if ok {
			require.Equal(t, want[:p.TopK], scan, "trial %d", trial)
		}
		got := slices.Clone(s.filtered(logits, history))
		ref := NewSampler(p)
		require.Equal(t, ref.filter(ref.penalize(logits, history)), got, "trial %d", trial)
	}
}

// randomRow is n logits drawn by value, with NaN, -Inf and +Inf at the given rates.
func randomRow(rng *rand.Rand, n int, nanRate, negInfRate, posInfRate float64, value func() float32) []float32 {
	row := make([]float32, n)
	for i := range row {
		switch r := rng.Float64(); {
		case r < nanRate:
			row[i] = nan
		case r < nanRate+negInfRate:
			row[i] = float32(math.Inf(-1))
		case r < nanRate+negInfRate+posInfRate:
			row[i] = inf
		default:
			row[i] = value()
		}
	}
	return row
}

// finiteBestFirst is the reference order of the tests: every finite logit of w as a candidate,
// sorted by a stable sort, the largest first, ties in id order.
func finiteBestFirst(w []float32) []candidate {
	var out []candidate
	for i, v := range w {
		if !math.IsInf(float64(v), 0) && v == v {
			out = append(out, candidate{id: int32(i), logit: float64(v)})
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		switch {
		case a.logit > b.logit:
			return -1
		case a.logit < b.logit:
			return 1
		}
		return 0 // stable: the lower id first
	})
	return out
}

// allowSet is a Constraint that allows a fixed set of tokens.
type allowSet map[int32]bool

func (a allowSet) Allows(t int32) bool { return a[t] }

func (a allowSet) Mask(logits []float32) int {
	n := 0
	for i := range logits {
		if a[int32(i)] {
			n++
		} else {
			logits[i] = float32(math.Inf(-1))
		}
	}
	return n
}

// TestConstraintIsMaskedRow: a constrained sampler draws, from the same seed, exactly the
// tokens an unconstrained one draws from the row whose disallowed logits were set to -Inf
// beforehand (the logit bias and the penalties leave -Inf alone), for every setting of the
// chain, greedy included; Probs agree too.
func TestConstraintIsMaskedRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := range 1500 {
		n := 1 + rng.IntN(500)
		logits := randomRow(rng, n, 0.02, 0.02, 0, func() float32 { return float32(rng.NormFloat64() * 3) })
		allowed := allowSet{}
		for i := range n {
			if rng.IntN(4) == 0 && logits[i] == logits[i] && !math.IsInf(float64(logits[i]), 0) {
				allowed[int32(i)] = true
			}
		}
		if len(allowed) == 0 {
			continue
		}
		masked := slices.Clone(logits)
		allowed.Mask(masked)
		p := Params{Temperature: []float64{0, 0.3, 1, 2}[rng.IntN(4)], TopK: []int{0, 1, 5, 40}[rng.IntN(4)],
			TopP: []float64{1, 0.9, 0.5}[rng.IntN(3)], MinP: []float64{0, 0.05}[rng.IntN(2)], RepeatPenalty: 1, RepeatLastN: 64, Seed: uint64(trial)}
		var history []int32
		if trial%3 == 1 {
			p.RepeatPenalty, p.FrequencyPenalty = 1.3, 0.5
			p.LogitBias = map[int32]float64{int32(rng.IntN(n)): 5}
			for range 20 {
				history = append(history, int32(rng.IntN(n)))
			}
		}
		c, ref := NewSampler(p), NewSampler(p)
		c.Constrain(allowed)
		require.False(t, c.Greedy())
		for range 4 {
			got, want := c.Sample(logits, history), ref.Sample(masked, history)
			require.Equal(t, want, got, "trial %d %v", trial, p)
			require.True(t, allowed[got], "trial %d: token %d is not allowed", trial, got)
		}
		assert.Equal(t, ref.Probs(masked, history, nil), c.Probs(logits, history, nil), "trial %d", trial)
	}
}

// TestConstraintAllowsNothing: -1 where nothing may come next; the first allowed token where
// every allowed logit is -Inf or NaN.
func TestConstraintAllowsNothing(t *testing.T) {
	for _, p := range []Params{GreedyParams(), DefaultParams()} {
		s := NewSampler(p)
		s.Constrain(allowSet{})
		assert.Equal(t, int32(-1), s.Sample([]float32{1, 2, 3}, nil))
		assert.Equal(t, []float64{0, 0, 0}, s.Probs([]float32{1, 2, 3}, nil, nil))
		s.Constrain(allowSet{2: true, 1: true})
		assert.Equal(t, int32(1), s.Sample([]float32{5, float32(math.Inf(-1)), nan}, nil))
		assert.Equal(t, []float64{0, 1, 0}, s.Probs([]float32{5, float32(math.Inf(-1)), nan}, nil, nil))
	}
}
