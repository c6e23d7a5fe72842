package decoding

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// constLogits returns rows of vocab equal logits for every token: the uniform distribution.
func constLogits(vocab int) func([]int32) ([][]float32, error) {
	return func(tokens []int32) ([][]float32, error) {
		rows := make([][]float32, len(tokens))
		for i := range rows {
			rows[i] = make([]float32, vocab)
			for j := range rows[i] {
				rows[i][j] = 0.75
			}
		}
		return rows, nil
	}
}

func TestPerplexityUniformIsVocabulary(t *testing.T) {
	const vocab, nctx = 17, 10
	ids := make([]int32, 3*nctx+5)
	for i := range ids {
		ids[i] = int32(i % vocab)
	}
	var progress []float64
	r, err := Perplexity(ids, PerplexityOptions{Context: nctx, BOS: -1, Progress: func(c int, ppl float64) {
		assert.Equal(t, len(progress), c)
		progress = append(progress, ppl)
	}}, constLogits(vocab))
	require.NoError(t, err)
	assert.InDelta(t, vocab, r.PPL, 1e-9)
	assert.InDelta(t, math.Log(vocab), r.NLL, 1e-12)
	assert.InDelta(t, 0, r.StdErr, 1e-6, "every token has the same NLL (up to rounding)")
	assert.Equal(t, 3, r.Chunks, "the partial last chunk is dropped")
	assert.Equal(t, 3*(nctx-1-nctx/2), r.Scored, "the second half of each chunk, less its last token")
	require.Len(t, progress, 3)
	for _, p := range progress {
		assert.InDelta(t, vocab, p, 1e-9)
	}

	r, err = Perplexity(ids, PerplexityOptions{Context: nctx, BOS: -1, MaxChunks: 2}, constLogits(vocab))
	require.NoError(t, err)
	assert.Equal(t, 2, r.Chunks)
}

// TestPerplexityByHand: with two tokens and logits (0, ln 3) the probabilities are 1/4 and
// 3/4, so a chunk whose one scored target is token 1 has perplexity 4/3, and adding a chunk
// whose target is token 0 (NLL ln 4) gives exp((ln 4/3 + ln 4)/2) = sqrt(16/3).
func TestPerplexityByHand(t *testing.T) {
	row := []float32{0, float32(math.Log(3))}
	logits := func(tokens []int32) ([][]float32, error) {
		return [][]float32{row, row, row, row}, nil
	}
	// Context 4 scores position 2 only: the target is the chunk's token 3.
	ids := []int32{1, 1, 1, 1, 0, 0, 0, 0, 1}
	var progress []float64
	r, err := Perplexity(ids, PerplexityOptions{Context: 4, BOS: -1, Progress: func(_ int, ppl float64) { progress = append(progress, ppl) }}, logits)
	require.NoError(t, err)
	assert.Equal(t, 2, r.Chunks)
	assert.Equal(t, 2, r.Scored)
	assert.InDelta(t, math.Sqrt(16.0/3), r.PPL, 1e-6)
	require.Len(t, progress, 2)
	assert.InDelta(t, 4.0/3, progress[0], 1e-6)
	// NLLs ln(4/3) and ln 4: mean ln(4/√3), population variance (ln 3 / 2)², one degree of
	// freedom less: standard error ln 3 / 2 of the mean NLL, times the PPL.
	assert.InDelta(t, math.Sqrt(16.0/3)*math.Log(3)/2, r.StdErr, 1e-6)
}

// TestPerplexityMatchesFloat64Reference scores random logits and compares with a direct
// float64 computation: p = exp(x_t) / Σ exp(x), PPL = exp(mean -log p), and the standard
// error from the sample variance of the NLLs (two-pass).
func TestPerplexityMatchesFloat64Reference(t *testing.T) {
	const vocab, nctx, chunks = 50, 16, 4
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, chunks*nctx+3)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	const bos = int32(7)
	type call struct {
		tokens []int32
		rows   [][]float32
	}
	var calls []call
	logits := func(tokens []int32) ([][]float32, error) {
		rows := make([][]float32, len(tokens))
		for i := range rows {
			rows[i] = make([]float32, vocab)
			for j := range rows[i] {
				rows[i][j] = float32(3 * rng.NormFloat64())
			}
		}
		calls = append(calls, call{append([]int32(nil), tokens...), rows})
		return rows, nil
	}
	r, err := Perplexity(ids, PerplexityOptions{Context: nctx, BOS: bos}, logits)
	require.NoError(t, err)
	require.Len(t, calls, chunks)

	var nlls []float64
	for c, cl := range calls {
		assert.Equal(t, bos, cl.tokens[0], "chunk %d starts with BOS", c)
		assert.Equal(t, ids[c*nctx+1:(c+1)*nctx], cl.tokens[1:], "chunk %d is the text's", c)
		for j := nctx / 2; j < nctx-1; j++ {
			sum := 0.0
			for _, x := range cl.rows[j] {
				sum += math.Exp(float64(x))
			}
			nlls = append(nlls, -math.Log(math.Exp(float64(cl.rows[j][cl.tokens[j+1]]))/sum))
		}
	}
	mean := 0.0
	for _, l := range nlls {
		mean += l
	}
	mean /= float64(len(nlls))
	ss := 0.0
	for _, l := range nlls {
		ss += (l - mean) * (l - mean)
	}
	ppl := math.Exp(mean)
	stderr := ppl * math.Sqrt(ss/float64(len(nlls)-1)/float64(len(nlls)))
	assert.Equal(t, len(nlls), r.Scored)
	assert.InEpsilon(t, mean, r.NLL, 1e-12)
	assert.InEpsilon(t, ppl, r.PPL, 1e-12)
	assert.InEpsilon(t, stderr, r.StdErr, 1e-9)
}

func TestPerplexityErrors(t *testing.T) {
	ids := make([]int32, 20)
	for _, c := range []int{-1, 0, 1, 2} { // each would score no token: PPL NaN
		_, err := Perplexity(ids, PerplexityOptions{Context: c, BOS: -1}, constLogits(4))
		assert.ErrorContains(t, err, "at least 3", "context %d", c)
	}
	r, err := Perplexity(ids, PerplexityOptions{Context: MinPerplexityContext, BOS: -1}, constLogits(4))
	require.NoError(t, err)
	assert.InDelta(t, 4, r.PPL, 1e-9, "the smallest context scores a token")
	_, err = Perplexity(ids, PerplexityOptions{Context: 8, BOS: -1, MaxChunks: -1}, constLogits(4))
	assert.ErrorContains(t, err, "-1 chunks")
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		_, err = Perplexity(ids, PerplexityOptions{Context: 8, BOS: -1}, func(tok []int32) ([][]float32, error) {
			rows, _ := constLogits(4)(tok)
			rows[5][1] = bad
			return rows, nil
		})
		assert.ErrorContains(t, err, "non-finite logits", "a logit of %v", bad)
	}
	_, err = Perplexity(ids, PerplexityOptions{Context: 32, BOS: -1}, constLogits(4))
	assert.ErrorContains(t, err, "20 tokens are fewer than one chunk of 32")
	boom := errors.New("boom")
	_, err = Perplexity(ids, PerplexityOptions{Context: 8, BOS: -1}, func([]int32) ([][]float32, error) { return nil, boom })
	assert.ErrorIs(t, err, boom)
	_, err = Perplexity(ids, PerplexityOptions{Context: 8, BOS: -1}, func(tok []int32) ([][]float32, error) {
		rows, _ := constLogits(4)(tok)
		return rows[:3], nil
	})
	assert.ErrorContains(t, err, "3 rows of logits for a chunk of 8 tokens")
	ids[7] = 9 // a target beyond the 4 logits of a row
	_, err = Perplexity(ids, PerplexityOptions{Context: 8, BOS: -1}, constLogits(4))
	assert.ErrorContains(t, err, "token 9 is outside the 4 logits")
}
