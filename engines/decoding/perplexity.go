package decoding

import (
	"fmt"
	"math"
)

// MinPerplexityContext is the smallest chunk Perplexity scores anything of: positions
// Context/2 to Context-2 are scored, so a context of 1 or 2 tokens scores none.
const MinPerplexityContext = 3

// PerplexityOptions says how Perplexity cuts and scores a text.
type PerplexityOptions struct {
	// Context is the chunk size in tokens, the decoder's context (at least
	// MinPerplexityContext).
	Context int
	// BOS, when not negative, replaces the first token of every chunk, as llama.cpp does for
	// a vocabulary that adds a BOS token.
	BOS int32
	// MaxChunks scores at most this many chunks (0: every whole chunk of the text).
	MaxChunks int
	// Progress, when not nil, is called after each chunk with its 0-based index and the
	// perplexity of the chunks so far.
	Progress func(chunk int, ppl float64)
}

// PerplexityResult is what Perplexity measured.
type PerplexityResult struct {
	// PPL is the perplexity: exp of the mean negative log-likelihood of the scored tokens.
	PPL float64
	// StdErr is the standard error of PPL, as llama.cpp reports it (PPL times the standard
	// error of the mean negative log-likelihood); 0 with fewer than two scored tokens.
	StdErr float64
	// NLL is the mean negative log-likelihood in nats per scored token.
	NLL float64
	// Chunks is the number of chunks scored, Scored the number of tokens scored.
	Chunks, Scored int
}

// Perplexity computes the perplexity of ids as llama.cpp's perplexity tool does: the text is
// cut into non-overlapping chunks of o.Context tokens (a partial last chunk is dropped), the
// first token of each chunk becomes o.BOS when that is not negative, and the second half of
// each chunk is scored: for each position j from Context/2 to Context-2, the negative
// log-softmax of logits row j at the chunk's token j+1. logits returns one row of vocabulary
// logits per token of the chunk it is given (row i predicts token i+1), from an empty context;
// a decoder's Logits method is one.
func Perplexity(ids []int32, o PerplexityOptions, logits func(tokens []int32) ([][]float32, error)) (PerplexityResult, error) {
	var r PerplexityResult
	nctx := o.Context
	if nctx < MinPerplexityContext {
		return r, fmt.Errorf("perplexity: a context of %d tokens scores nothing (want at least %d)", nctx, MinPerplexityContext)
	}
	if o.MaxChunks < 0 {
		return r, fmt.Errorf("perplexity: %d chunks", o.MaxChunks)
	}
	total := len(ids) / nctx
	if o.MaxChunks > 0 && o.MaxChunks < total {
		total = o.MaxChunks
	}
	if total == 0 {
		return r, fmt.Errorf("perplexity: %d tokens are fewer than one chunk of %d", len(ids), nctx)
	}
	first := nctx / 2
	nll, nll2, count := 0.0, 0.0, 0
	chunk := make([]int32, nctx)
	for c := 0; c < total; c++ {
		copy(chunk, ids[c*nctx:(c+1)*nctx])
		if o.BOS >= 0 {
			chunk[0] = o.BOS
		}
		rows, err := logits(chunk)
		if err != nil {
			return r, err
		}
		if len(rows) < nctx-1 {
			return r, fmt.Errorf("perplexity: %d rows of logits for a chunk of %d tokens", len(rows), nctx)
		}
		for j := first; j < nctx-1; j++ {
			l, err := NLLOf(rows[j], chunk[j+1])
			if err == nil && (math.IsNaN(l) || math.IsInf(l, 0)) {
				err = fmt.Errorf("the negative log-likelihood is %v (non-finite logits)", l)
			}
			if err != nil {
				return r, fmt.Errorf("perplexity: chunk %d position %d: %w", c, j, err)
			}
			nll += l
			nll2 += l * l
			count++
		}
		if o.Progress != nil {
			o.Progress(c, math.Exp(nll/float64(count)))
		}
	}
	r.Chunks, r.Scored = total, count
	r.NLL = nll / float64(count)
	r.PPL = math.Exp(r.NLL)
	if count > 1 {
		// llama.cpp: the variance of the per-token NLL, the standard error of its mean, and
		// that error carried through exp to first order.
		if v := nll2/float64(count) - r.NLL*r.NLL; v > 0 {
			r.StdErr = r.PPL * math.Sqrt(v/float64(count-1))
		}
	}
	return r, nil
}

// NLLOf is the negative log-softmax of row at target, computed in float64.
func NLLOf(row []float32, target int32) (float64, error) {
	if target < 0 || int(target) >= len(row) {
		return 0, fmt.Errorf("token %d is outside the %d logits", target, len(row))
	}
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	sum := 0.0
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return -(float64(row[target]) - mx - math.Log(sum)), nil
}
