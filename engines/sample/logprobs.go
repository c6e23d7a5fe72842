package sample

import (
	"math"
)

// MaxTopLogprobs is the most alternatives KeepLogprobs records per step (OpenAI's API allows 20).
const MaxTopLogprobs = 20

// TokenLogprob is a token and the natural logarithm of its probability.
type TokenLogprob struct {
	Token   int32
	Logprob float64
}

// StepLogprobs is what a Sample with KeepLogprobs drew from: the drawn token's log-probability
// and the most likely tokens', most likely first (ties to the lower id), those of probability
// zero left out.
type StepLogprobs struct {
	TokenLogprob
	Top []TokenLogprob
}

// logprobRecord is KeepLogprobs' state.
type logprobRecord struct {
	top  int
	last StepLogprobs
	ok   bool
}

// fromCandidates records the draw among cand (probabilities that need not sum to 1, as draw
// takes them) of token t.
func (r *logprobRecord) fromCandidates(cand []candidate, t int32) {
	total := 0.0
	for _, c := range cand {
		total += c.p
	}
	logTotal := math.Log(total)
	r.last.Token, r.last.Logprob = t, 0
	top := r.last.Top[:0]
	for _, c := range cand {
		if c.p <= 0 {
			continue
		}
		lp := math.Log(c.p) - logTotal
		if c.id == t {
			r.last.Logprob = lp
		}
		top = insertTop(top, r.top, TokenLogprob{c.id, lp})
	}
	r.last.Top = top
}

// fromRow records token t taken by argmax from the row w (-Inf for the tokens masked out): the
// log-softmax of w at temperature 1.
func (r *logprobRecord) fromRow(w []float32, t int32) {
	m := math.Inf(-1)
	for _, v := range w {
		m = max(m, float64(v))
	}
	r.last.Token, r.last.Logprob = t, 0
	top := r.last.Top[:0]
	if math.IsInf(m, -1) { // nothing finite: the sampler's fallback token, taken for sure
		r.last.Top = insertTop(top, r.top, TokenLogprob{t, 0})
		return
	}
	sum := 0.0
	for _, v := range w {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	r.last.Logprob = float64(w[t]) - lse
	if math.IsInf(r.last.Logprob, -1) {
		r.last.Logprob = 0 // every allowed token was -Inf: the fallback, taken for sure
	}
	for i, v := range w {
		if r.top == 0 {
			break
		}
		if math.IsInf(float64(v), -1) {
			continue
		}
		if len(top) == r.top && float64(v)-lse <= top[len(top)-1].Logprob {
			continue // fast path: not better than the worst kept
		}
		top = insertTop(top, r.top, TokenLogprob{int32(i), float64(v) - lse})
	}
	r.last.Top = top
}

// insertTop inserts x into top (at most k entries, most likely first, ties to the lower id)
// when it belongs there.
func insertTop(top []TokenLogprob, k int, x TokenLogprob) []TokenLogprob {
	if k == 0 {
		return top
	}
	ahead := func(a, b TokenLogprob) bool {
		return a.Logprob > b.Logprob || a.Logprob == b.Logprob && a.Token < b.Token
	}
	if len(top) == k && !ahead(x, top[k-1]) {
		return top
	}
	i := len(top)
	for i > 0 && ahead(x, top[i-1]) {
		i--
	}
	if len(top) < k {
		top = append(top, TokenLogprob{})
	}
	copy(top[i+1:], top[i:len(top)-1])
	top[i] = x
	return top
}
