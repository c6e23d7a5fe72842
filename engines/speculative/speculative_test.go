package speculative

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/decoding/decodingtest"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// perturbed copies the f32 GGUF at src with every matrix's values multiplied by 1 + rel·N(0, 1):
// a draft that agrees with the target often, but not always.
func perturbed(t *testing.T, src string, rel float64, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	return transformertest.Rewrite(t, src, nil, func(ti gguffile.TensorInfo, data []byte) (string, []int64, []byte, uint32, bool) {
		ne := ti.Shape()
		if len(ne) < 2 || ti.Type != uint32(ggml.F32) {
			return ti.Name, ne, data, ti.Type, true
		}
		out := make([]byte, len(data))
		for i := 0; i < len(data); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
			v *= float32(1 + rel*rng.NormFloat64())
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(v))
		}
		return ti.Name, ne, out, ti.Type, true
	})
}

// TestTruncate checks the rollback: after Truncate(k) the decoder continues exactly as one
// that read only the first k tokens.
func TestTruncate(t *testing.T) {
	for _, fa := range []bool{false, true} {
		m := decodingtest.OpenTiny(t, transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F32, 1), decoding.ModelOptions{})
		rng := rand.New(rand.NewPCG(1, 2))
		seq := transformertest.RandomTokens(rng, 20, m.Arch.Vocab)
		opts := decoding.DecoderOptions{KVType: decoding.KVF32, FlashAttention: fa}
		d := decodingtest.NewDecoder(t, m, opts)
		_, err := d.Prompt(seq[:12])
		require.NoError(t, err)
		rows, err := d.Append(seq[12:16])
		require.NoError(t, err)
		require.Len(t, rows, 4)
		require.NoError(t, d.Truncate(9))
		assert.Equal(t, seq[:9], d.History())
		got, err := d.Prompt(seq[9:20])
		require.NoError(t, err)
		got = append([]float32(nil), got...)

		ref := decodingtest.NewDecoder(t, m, opts)
		want, err := ref.Prompt(seq[:20])
		require.NoError(t, err)
		assert.InDeltaSlice(t, want, got, 1e-4, "fa %v", fa)
		assert.Error(t, d.Truncate(21))
		assert.Error(t, d.Truncate(-1))
	}
}

// targetGreedy generates n tokens greedily with the target alone, as toy generate does (fewer
// when the context fills).
func targetGreedy(t *testing.T, d *decoding.Decoder, prompt []int32, n int) []int32 {
	d.Reset()
	s := sample.NewSampler(sample.GreedyParams())
	logits, err := d.Prompt(prompt)
	require.NoError(t, err)
	hist := append([]int32(nil), prompt...)
	var out []int32
	for len(out) < n {
		x := s.Sample(logits, hist)
		out, hist = append(out, x), append(hist, x)
		if len(out) == n {
			break
		}
		if logits, err = d.Next(x); errors.Is(err, decoding.ErrContextFull) {
			break
		}
		require.NoError(t, err)
	}
	return out
}

// specGenerate generates up to n tokens with sp (fewer when the context fills).
func specGenerate(t *testing.T, sp *Speculative, prompt []int32, n int) []int32 {
	require.NoError(t, sp.Prompt(prompt))
	var out []int32
	for len(out) < n {
		toks, err := sp.Step(n - len(out))
		if errors.Is(err, decoding.ErrContextFull) {
			break
		}
		require.NoError(t, err)
		require.NotEmpty(t, toks)
		out = append(out, toks...)
	}
	return out
}

// TestSpeculativeGreedyIsTarget checks that greedy speculative decoding gives the target's
// own tokens, for drafts that agree always (the target's file), often (the target's seed with
// fewer layers) and rarely (another model), several prompts and γ, up to a full context.
// With a minimum draft probability (SetMinProbability), the drafts stop early, the output
// staying the target's.
func TestSpeculativeGreedyIsTarget(t *testing.T) {
	stopped := map[float64]int{} // proposals short of γ a drafting step, by minimum probability
	defer func() {
		t.Logf("proposals short of γ a drafting step, by minimum: %v", stopped)
		assert.Greater(t, stopped[0.1], stopped[0], "a minimum stops drafts that only the step limits would not")
		assert.Greater(t, stopped[0.5], stopped[0.1])
	}()
	for _, variant := range []string{"llama", "qwen3"} {
		a := transformertest.TinyArch(variant)
		a.NLayers = 3
		tpath := transformertest.WriteTiny(t, a, ggml.F32, 7)
		short := a
		short.NLayers = 1
		drafts := map[string]string{
			"same":    tpath,
			"noisy":   perturbed(t, tpath, 0.1, 3),
			"shallow": transformertest.WriteTiny(t, short, ggml.F32, 7),
			"other":   transformertest.WriteTiny(t, short, ggml.F32, 99),
		}
		tm := decodingtest.OpenTiny(t, tpath, decoding.ModelOptions{})
		td := decodingtest.NewDecoder(t, tm, decoding.DecoderOptions{})
		rng := rand.New(rand.NewPCG(3, 4))
		prompts := [][]int32{{5}, transformertest.RandomTokens(rng, 7, a.Vocab), transformertest.RandomTokens(rng, 30, a.Vocab)}
		want := make([][]int32, len(prompts))
		for i, p := range prompts {
			want[i] = targetGreedy(t, td, p, 40)
		}
		for name, dpath := range drafts {
			dm := decodingtest.OpenTiny(t, dpath, decoding.ModelOptions{})
			dd := decodingtest.NewDecoder(t, dm, decoding.DecoderOptions{})
			for _, gamma := range []int{1, 4, 8} {
				for _, pMin := range []float64{0, 0.1, 0.5} {
					sp, err := NewSpeculative(td, dd, gamma, sample.NewSampler(sample.GreedyParams()))
					require.NoError(t, err)
					require.NoError(t, sp.SetMinProbability(pMin))
					var st SpecStats
					for i, p := range prompts {
						got := specGenerate(t, sp, p, 40)
						require.Equal(t, want[i], got, "%s draft %s γ %d p-min %g prompt %d", variant, name, gamma, pMin, i)
						st = addStats(st, sp.Stats())
					}
					assert.Equal(t, st.Generated, st.Accepted+st.Steps)
					if name == "same" {
						assert.Equal(t, st.Drafted, st.Accepted, "the target's own file as draft: every proposal accepted")
						if pMin == 0 {
							assert.Zero(t, st.Plain, "nothing rejected, nothing skipped")
						}
					}
					if name == "other" && gamma == 4 && pMin == 0 {
						assert.Positive(t, st.Plain, "a draft that rarely agrees makes plain steps")
					}
					stopped[pMin] += gamma*(st.Steps-st.Plain) - st.Drafted
					t.Logf("%s draft %s γ %d p-min %g: %d steps (%d plain), %d proposals, mean accepted %.2f", variant, name, gamma, pMin, st.Steps, st.Plain, st.Drafted, st.MeanAccepted())
				}
			}
		}
	}
}

// addStats sums the counters of two SpecStats.
func addStats(a, b SpecStats) SpecStats {
	return SpecStats{Steps: a.Steps + b.Steps, Drafted: a.Drafted + b.Drafted, Accepted: a.Accepted + b.Accepted, Generated: a.Generated + b.Generated, Plain: a.Plain + b.Plain}
}

// TestSpeculativeVocabMismatch: a draft of another vocabulary is an error before anything runs.
func TestSpeculativeVocabMismatch(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	b := a
	b.Vocab = 40
	td := decodingtest.NewDecoder(t, decodingtest.OpenTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 1), decoding.ModelOptions{}), decoding.DecoderOptions{})
	dd := decodingtest.NewDecoder(t, decodingtest.OpenTiny(t, transformertest.WriteTiny(t, b, ggml.F32, 1), decoding.ModelOptions{}), decoding.DecoderOptions{})
	_, err := NewSpeculative(td, dd, 4, sample.NewSampler(sample.GreedyParams()))
	assert.ErrorContains(t, err, "vocabulary of 40 tokens")
	_, err = NewSpeculative(td, td, 4, sample.NewSampler(sample.GreedyParams()))
	assert.Error(t, err)
}

// TestSpeculativeSamplingDistribution checks the rejection-sampling rule statistically on a
// vocabulary of 6: the first generated token's empirical distribution matches the target's
// within a chi-square bound, though the draft's distribution is far from it (so that a draft
// accepted blindly would fail the same test).
func TestSpeculativeSamplingDistribution(t *testing.T) {
	a := transformertest.TinyArch("qwen3")
	a.Vocab = 6
	tpath := transformertest.WriteTiny(t, a, ggml.F32, 11)
	tm := decodingtest.OpenTiny(t, tpath, decoding.ModelOptions{})
	dm := decodingtest.OpenTiny(t, perturbed(t, tpath, 1.5, 12), decoding.ModelOptions{})
	td := decodingtest.NewDecoder(t, tm, decoding.DecoderOptions{})
	dd := decodingtest.NewDecoder(t, dm, decoding.DecoderOptions{})
	params := sample.Params{Temperature: 1.5, TopP: 1, RepeatPenalty: 1, Seed: 5}
	prompt := []int32{1, 4, 2}
	dist := func(d *decoding.Decoder) []float64 {
		d.Reset()
		logits, err := d.Prompt(prompt)
		require.NoError(t, err)
		return sample.NewSampler(params).Probs(logits, prompt, nil)
	}
	p, q := dist(td), dist(dd)
	tv := 0.0
	for i := range p {
		tv += math.Abs(p[i]-q[i]) / 2
	}
	t.Logf("target %.3f, draft %.3f, total variation %.3f", p, q, tv)
	require.Greater(t, tv, 0.1, "the draft must differ from the target for the test to mean anything")

	const N = 3000
	for _, pMin := range []float64{0, 0.3} {
		sp, err := NewSpeculative(td, dd, 2, sample.NewSampler(params))
		require.NoError(t, err)
		require.NoError(t, sp.SetMinProbability(pMin))
		counts := make([]float64, a.Vocab)
		var st SpecStats
		for i := 0; i < N; i++ {
			require.NoError(t, sp.Prompt(prompt))
			toks, err := sp.Step(3)
			require.NoError(t, err)
			counts[toks[0]]++
			st = addStats(st, sp.Stats())
		}
		x2p, x2q := chiSquare(counts, p), chiSquare(counts, q)
		t.Logf("p-min %g: counts %v, χ² %.2f against the target, %.2f against the draft; %d of %d proposals accepted in %d steps", pMin, counts, x2p, x2q, st.Accepted, st.Drafted, st.Steps)
		// 5 degrees of freedom: P(χ² > 20.5) = 0.001.
		assert.Less(t, x2p, 20.5, "p-min %g: the first token follows the target's distribution", pMin)
		assert.Greater(t, x2q, 20.5, "p-min %g: and not the draft's", pMin)
		if pMin > 0 {
			assert.Less(t, st.Drafted, 2*st.Steps*9/10, "the minimum stopped at least a tenth of the proposals")
			assert.Positive(t, st.Drafted)
		}
	}
}

// chiSquare is Pearson's χ² of counts against the distribution p (infinite where a count
// falls on a zero probability).
func chiSquare(counts, p []float64) float64 {
	n := 0.0
	for _, c := range counts {
		n += c
	}
	x := 0.0
	for i, c := range counts {
		if e := n * p[i]; e > 0 {
			x += (c - e) * (c - e) / e
		} else if c > 0 {
			return math.Inf(1)
		}
	}
	return x
}

func TestBenchSpeculative(t *testing.T) {
	path := transformertest.WriteTiny(t, transformertest.TinyArch("llama"), ggml.F32, 2)
	rs, err := BenchSpeculative(path, []SpecDrafter{{Path: path, Gamma: 4}}, 8, 12, 1, decoding.BenchOptions{Reps: 1})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	r := rs[0]
	assert.True(t, r.Identical)
	assert.Equal(t, r.Stats.Drafted, r.Stats.Accepted, "the target as its own draft")
	assert.Positive(t, r.Spec.Mean)
	assert.Positive(t, r.Plain.Mean)
}
