package sample

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/toyml/toy/internal/sampleparams"
)

// Params configures a Sampler: the fields of the Sampling options spec (generated/config),
// with Validate, String and AdjustsLogits. The zero value is not valid (TopP and RepeatPenalty
// must be 1 to be off); start from DefaultParams or GreedyParams.
type Params = sampleparams.Params

// MaxLogitBias bounds a logit bias either way, as OpenAI's API does: -MaxLogitBias bans a
// token in practice, +MaxLogitBias all but forces it. The commands refuse more (Validate only
// asks for finite values).
const MaxLogitBias = 100

// DefaultParams returns llama.cpp's default sampling settings: temperature
// 0.8, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty (over a
// window of 64 tokens when enabled) and seed 0.
func DefaultParams() Params { return sampleparams.DefaultParams() }

// GreedyParams returns settings for greedy decoding with every filter off.
func GreedyParams() Params { return sampleparams.GreedyParams() }

// Constraint limits the tokens a Sampler may draw to those a grammar allows next
// (engines/grammar's Matcher). The Sampler only reads it; whoever draws the token advances it.
type Constraint interface {
	// Allows reports whether token may come next.
	Allows(token int32) bool
	// Mask sets to -Inf the logits of the tokens that may not come next and returns how many
	// may.
	Mask(logits []float32) int
}

// Sampler draws tokens from logits according to its Params. It keeps
// scratch buffers between calls and is not safe for concurrent use.
type Sampler struct {
	c      Constraint // nil: every token may come next
	p      Params
	rng    *rand.Rand
	work   []float32
	cand   []candidate
	best   []candidate   // top-p's candidates, best first
	counts map[int32]int // the penalties' counts of the tokens in their window
	// drawn is the candidates the last draw chose among, and lp what Sample records of each
	// step's distribution (KeepLogprobs), nil when off.
	drawn []candidate
	lp    *logprobRecord
}

// pcgStream is the PCG stream constant paired with Params.Seed.
const pcgStream = 0x9e3779b97f4a7c15

// NewSampler returns a Sampler for p. It panics if p.Validate fails; check
// user-supplied parameters with Validate first.
func NewSampler(p Params) *Sampler {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return &Sampler{
		p:      p,
		rng:    rand.New(rand.NewPCG(p.Seed, pcgStream)),
		counts: make(map[int32]int),
	}
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params { return s.p }

// Greedy reports whether Sample is the argmax of the logits: temperature 0, no penalty, no
// logit bias and no constraint. It then costs one pass over the row, a few tens of
// microseconds for a large vocabulary, and neither copies the row nor draws a random number.
func (s *Sampler) Greedy() bool {
	return s.p.Temperature == 0 && !s.p.AdjustsLogits() && s.c == nil
}

// Constrain makes the sampler draw only tokens c allows (nil: any): their logits are masked
// after the logit bias and the penalties, before top-k, temperature and the rest of the
// chain, at temperature 0 too. The caller advances c with each token it takes.
func (s *Sampler) Constrain(c Constraint) { s.c = c }

// penalized reports whether a penalty changes any logit.
func (s *Sampler) penalized() bool {
	return s.p.RepeatLastN != 0 && (s.p.RepeatPenalty != 1 || s.p.FrequencyPenalty != 0 || s.p.PresencePenalty != 0)
}

// Sample picks the next token from one row of logits (one value per
// vocabulary entry). history holds the tokens generated or read so far,
// oldest first, for the repetition penalty; it may be nil. logits and
// history are not modified. Sample returns -1 for an empty row and where the
// constraint allows no token. With KeepLogprobs, it also records the
// distribution it drew from (LastLogprobs).
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	if s.lp != nil {
		return s.sampleRecorded(logits, history)
	}
	return s.sample(logits, history)
}

// sample is Sample without the record of KeepLogprobs.
func (s *Sampler) sample(logits []float32, history []int32) int32 {
	if len(logits) == 0 {
		return -1
	}
	if s.c != nil {
		return s.constrained(logits, history)
	}
	if s.Greedy() {
		return argmax(logits) // what penalize's copy would give: NaN never wins, every NaN gives 0
	}
	if s.p.Temperature == 0 {
		return argmax(s.penalize(logits, history))
	}
	cand := s.filtered(logits, history)
	if len(cand) == 0 {
		return 0
	}
	return s.draw(cand)
}

// KeepLogprobs makes every Sample record the distribution it drew the token from, read with
// LastLogprobs: the drawn token's log-probability and those of the top (0 to MaxTopLogprobs)
// most likely tokens. With temperature > 0 that is the distribution after the whole chain —
// logit bias, penalties, the constraint's mask, top-k, temperature, top-p and min-p —
// renormalised over the candidates that survive (the draw's own probabilities, not recomputed):
// a token filtered out is not among the top. At temperature 0 (an argmax, which draws from no
// distribution) it is the softmax at temperature 1 of the logits after the logit bias, the
// penalties and the constraint's mask, over the whole vocabulary. A negative top turns it off.
func (s *Sampler) KeepLogprobs(top int) {
	if top < 0 {
		s.lp = nil
		return
	}
	s.lp = &logprobRecord{top: min(top, MaxTopLogprobs)}
}

// LastLogprobs returns the record of the last Sample (KeepLogprobs); ok is false when it
// is off or that Sample returned no token. Top belongs to the sampler until its next Sample.
func (s *Sampler) LastLogprobs() (StepLogprobs, bool) {
	if s.lp == nil || !s.lp.ok {
		return StepLogprobs{}, false
	}
	return s.lp.last, true
}

// sampleRecorded is Sample with KeepLogprobs on.
func (s *Sampler) sampleRecorded(logits []float32, history []int32) int32 {
	r := s.lp
	r.ok = false
	s.drawn = nil
	t := s.sample(logits, history)
	if t < 0 {
		return t
	}
	if s.drawn != nil {
		r.fromCandidates(s.drawn, t)
	} else {
		w := s.penalize(logits, history)
		if s.c != nil {
			s.c.Mask(w)
		}
		r.fromRow(w, t)
	}
	r.ok = true
	return t
}

// constrained is Sample with a constraint: the row after the logit bias and the penalties,
// masked, then the rest of the chain. At temperature 0 the argmax of the unmasked row is taken
// when the constraint allows it (the argmax of the masked row then too), which spares the mask.
// Where every token allowed has a logit of -Inf or NaN, it returns the first allowed.
func (s *Sampler) constrained(logits []float32, history []int32) int32 {
	w := s.penalize(logits, history)
	if s.p.Temperature == 0 {
		if t := argmax(w); !math.IsInf(float64(w[t]), -1) && s.c.Allows(t) {
			return t
		}
	}
	if s.c.Mask(w) == 0 {
		return -1
	}
	if s.p.Temperature == 0 {
		if t := argmax(w); !math.IsInf(float64(w[t]), -1) {
			return t
		}
		return s.firstAllowed(len(w))
	}
	cand := s.filter(w)
	if len(cand) == 0 {
		return s.firstAllowed(len(w))
	}
	return s.draw(cand)
}

// firstAllowed is the lowest token of n that the constraint allows, -1 if none.
func (s *Sampler) firstAllowed(n int) int32 {
	for t := range int32(n) {
		if s.c.Allows(t) {
			return t
		}
	}
	return -1
}

// filtered is filter of the row of logits after the logit bias and the penalties: the row
// itself where neither applies (filter takes NaN as -Inf), penalize's copy elsewhere.
func (s *Sampler) filtered(logits []float32, history []int32) []candidate {
	if len(s.p.LogitBias) > 0 || s.penalized() && len(history) > 0 {
		return s.filter(s.penalize(logits, history))
	}
	return s.filter(logits)
}

// penalize copies logits into the scratch row with NaN mapped to -Inf, the
// logit bias added, and the penalties applied: each distinct token of the
// window has its logit divided by RepeatPenalty (multiplied when negative),
// then lowered by count·FrequencyPenalty + PresencePenalty, as llama.cpp's
// penalties sampler does.
func (s *Sampler) penalize(logits []float32, history []int32) []float32 {
	w := append(s.work[:0], logits...)
	s.work = w
	for i, v := range w {
		if v != v {
			w[i] = float32(math.Inf(-1))
		}
	}
	for t, b := range s.p.LogitBias {
		if int(t) < len(w) {
			w[t] += float32(b)
		}
	}
	if !s.penalized() || len(history) == 0 {
		return w
	}
	window := history
	if n := s.p.RepeatLastN; n > 0 && n < len(window) {
		window = window[len(window)-n:]
	}
	clear(s.counts)
	for _, t := range window {
		if t >= 0 && int(t) < len(w) {
			s.counts[t]++
		}
	}
	pen, freq, pres := float32(s.p.RepeatPenalty), float32(s.p.FrequencyPenalty), float32(s.p.PresencePenalty)
	for t, c := range s.counts {
		if w[t] > 0 {
			w[t] /= pen
		} else {
			w[t] *= pen
		}
		w[t] -= float32(c)*freq + pres
	}
	return w
}

// argmax returns the first index of the largest value, skipping NaN; 0 when
// every value is NaN. It keeps four running maxima, of the indices i%4, so
// that no comparison waits on the one before (2.3x a plain scan over 49152
// logits); they are merged at the end, the lower index winning a tie.
func argmax(w []float32) int32 {
	negInf := float32(math.Inf(-1))
	bv := [4]float32{negInf, negInf, negInf, negInf}
	bi := [4]int{-1, -1, -1, -1}
	n := len(w) - len(w)%4
	for i := 0; i < n; i += 4 {
		x := w[i : i+4 : i+4]
		if x[0] > bv[0] {
			bv[0], bi[0] = x[0], i
		}
		if x[1] > bv[1] {
			bv[1], bi[1] = x[1], i+1
		}
		if x[2] > bv[2] {
			bv[2], bi[2] = x[2], i+2
		}
		if x[3] > bv[3] {
			bv[3], bi[3] = x[3], i+3
		}
	}
	for i := n; i < len(w); i++ {
		if j := i % 4; w[i] > bv[j] {
			bv[j], bi[j] = w[i], i
		}
	}
	best := -1
	for j := range bv {
		if bi[j] >= 0 && (best < 0 || bv[j] > bv[best] || bv[j] == bv[best] && bi[j] < bi[best]) {
			best = j
		}
	}
	if best >= 0 {
		return int32(bi[best])
	}
	// Every value is -Inf or NaN: the first -Inf, as a plain scan finds it.
	for i, v := range w {
		if v == v {
			return int32(i)
		}
	}
	return 0
}

// filter runs top-k, temperature, softmax, top-p and min-p over the
// (penalised) row, where NaN counts as -Inf, and returns the surviving
// candidates with their probabilities, which need not sum to 1. It returns
// nothing when every logit is -Inf or NaN.
func (s *Sampler) filter(w []float32) []candidate {
	if cand, ok := s.topKScan(w); ok {
		return s.shape(cand)
	}
	return s.nucleus(w)
}

// infinite is filter of a row that holds +Inf: only the +Inf tokens remain, equally likely,
// best first in id order.
func (s *Sampler) infinite(w []float32) []candidate {
	cand := s.cand[:0]
	for i, v := range w {
		if math.IsInf(float64(v), 1) {
			cand = append(cand, candidate{id: int32(i)})
		}
	}
	s.cand = cand
	if k := s.p.TopK; k > 0 && k < len(cand) {
		cand = cand[:k]
	}
	return s.shape(cand)
}

// topKScan is top-k over the row w (NaN counting as -Inf): the TopK best finite logits as
// candidates, best first, ties to the lower token id. It keeps a heap of the best k so far and
// compares each further logit with the heap's worst alone, one pass over the row. ok is false
// where top-k does not apply or +Inf decides: TopK off or not below the finite logits, or a
// logit +Inf (nucleus takes those rows).
func (s *Sampler) topKScan(w []float32) (cand []candidate, ok bool) {
	k := s.p.TopK
	if k <= 0 || k >= len(w) {
		return nil, false
	}
	negInf := float32(math.Inf(-1))
	h := s.cand[:0]
	i := 0
	for ; i < len(w) && len(h) < k; i++ {
		switch v := w[i]; {
		case math.IsInf(float64(v), 1):
			return nil, false
		case v > negInf: // neither NaN nor -Inf
			h = append(h, candidate{id: int32(i), logit: float64(v)})
		}
	}
	s.cand = h
	if len(h) < k {
		return nil, false
	}
	for j := k/2 - 1; j >= 0; j-- {
		siftDown(h, j)
	}
	worst := float32(h[0].logit)
	more := false // a finite logit beyond the first k: top-k cuts
	for ; i < len(w); i++ {
		v := w[i]
		if !(v > worst) { // a later equal logit loses the tie to the heap's (lower id)
			if !more && v > negInf {
				more = true
			}
			continue
		}
		if math.IsInf(float64(v), 1) {
			return nil, false
		}
		more = true
		h[0] = candidate{id: int32(i), logit: float64(v)}
		siftDown(h, 0)
		worst = float32(h[0].logit)
	}
	if !more {
		return nil, false
	}
	slices.SortFunc(h, cmpCandidates)
	return h, true
}

// shape runs temperature, softmax, top-p and min-p over the candidates that top-k left, best
// first, and returns those that survive, with their probabilities.
func (s *Sampler) shape(cand []candidate) []candidate {
	// Temperature and softmax together: exp((l - max) / T) never overflows,
	// however small T is.
	maxLogit := math.Inf(-1)
	for _, c := range cand {
		maxLogit = max(maxLogit, c.logit)
	}
	t := s.p.Temperature
	sum := 0.0
	for i := range cand {
		cand[i].logit = (cand[i].logit - maxLogit) / t
		cand[i].p = math.Exp(cand[i].logit)
		sum += cand[i].p
	}
	for i := range cand {
		cand[i].p /= sum
	}
	if s.p.TopP < 1 {
		cand = cand[:topPCount(cand, s.p.TopP)]
	}
	return s.minP(cand)
}

// minP drops the candidates whose probability is below MinP times the largest.
func (s *Sampler) minP(cand []candidate) []candidate {
	if s.p.MinP <= 0 {
		return cand
	}
	maxP := 0.0
	for _, c := range cand {
		maxP = max(maxP, c.p)
	}
	limit := s.p.MinP * maxP
	return slices.DeleteFunc(cand, func(c candidate) bool { return c.p < limit })
}

// negligible is the scaled logit (l - max) / T below which nucleus drops a token: its
// probability is below e^-64 (1.6e-28) of the most likely token's, so that dropping every such
// token of the largest vocabularies moves no probability by as much as float64 resolves.
const negligible = -64

// bucketsPerUnit cuts the scaled logits [negligible, 0] into the buckets nucleus's top-p
// adds up: 1/8 of a unit each, a probability ratio of at most e^(1/8) within one.
const bucketsPerUnit = 8

// nucleus is filter without top-k (TopK off or not below the finite logits of w; NaN counts
// as -Inf; a row with +Inf goes to infinite): temperature and softmax over every token not
// negligible, then top-p (topP). Making and sorting a candidate of every token took
// milliseconds a token for a large vocabulary (BenchmarkSample).
func (s *Sampler) nucleus(w []float32) []candidate {
	negInf := float32(math.Inf(-1))
	top := negInf
	for _, v := range w {
		if v > top { // not max: its NaN and signed-zero cases cost a branch chain a token
			top = v
		}
	}
	if math.IsInf(float64(top), 1) {
		return s.infinite(w)
	}
	cand := s.cand[:0]
	if top == negInf {
		s.cand = cand
		return cand
	}
	m, t := float64(top), s.p.Temperature
	// Below lo, (v - m) / t < negligible whatever the rounding: skip those without dividing.
	lo := float32(m + 2*negligible*t)
	sum := 0.0
	for i, v := range w {
		if v < lo {
			continue
		}
		x := (float64(v) - m) / t
		if !(x >= negligible) { // NaN too
			continue
		}
		e := math.Exp(x)
		sum += e
		cand = append(cand, candidate{id: int32(i), logit: x, p: e})
	}
	s.cand = cand
	for i := range cand {
		cand[i].p /= sum
	}
	if s.p.TopP < 1 {
		cand = s.topP(cand)
	}
	return s.minP(cand)
}

// topP keeps of cand (in id order, scaled logits in [negligible, 0], probabilities) the
// smallest best-first prefix whose probabilities add up to TopP (all when they never do), by
// buckets of the scaled logit: the buckets whose probabilities add up to less than TopP are
// kept whole, and only the bucket where TopP is reached is sorted, best first, and cut there.
// The survivors are the plain definition's, in another order: the whole buckets' tokens in id
// order, then the last bucket's, best first.
func (s *Sampler) topP(cand []candidate) []candidate {
	if len(cand) <= 64 {
		slices.SortFunc(cand, cmpCandidates)
		return cand[:topPCount(cand, s.p.TopP)]
	}
	bucket := func(c candidate) int { return int(-c.logit * bucketsPerUnit) }
	var mass [-negligible*bucketsPerUnit + 1]float64
	for _, c := range cand {
		mass[bucket(c)] += c.p
	}
	// The buckets before edge add up to less than TopP, edge reaches it.
	cum, edge := 0.0, 0
	for ; edge < len(mass)-1 && cum+mass[edge] < s.p.TopP; edge++ {
		cum += mass[edge]
	}
	// The whole buckets stay, in id order (cand is in id order); the rest goes aside.
	keep, rest := cand[:0], s.best[:0]
	for _, c := range cand {
		if bucket(c) < edge {
			keep = append(keep, c)
		} else {
			rest = append(rest, c)
		}
	}
	s.best = rest
	// Then bucket edge, best first, until the kept probabilities reach TopP: rounding may
	// leave them short of it at its end, and the next bucket goes on.
	for b := edge; b < len(mass) && len(rest) > 0; b++ {
		in := 0 // rest[:in] is bucket b
		for i, c := range rest {
			if bucket(c) == b {
				rest[in], rest[i] = rest[i], rest[in]
				in++
			}
		}
		slices.SortFunc(rest[:in], cmpCandidates)
		for _, c := range rest[:in] {
			keep = append(keep, c)
			if cum += c.p; cum >= s.p.TopP {
				return keep
			}
		}
		rest = rest[in:]
	}
	return keep
}

// topPCount is how many of the candidates, best first, it takes for their
// probabilities to add up to p (all of them when they never do).
func topPCount(cand []candidate, p float64) int {
	cum := 0.0
	for i, c := range cand {
		cum += c.p
		if cum >= p {
			return i + 1
		}
	}
	return len(cand)
}

// siftDown restores the heap of the best candidates below i, the worst at
// the root: no child is worse than its parent.
func siftDown(h []candidate, i int) {
	for {
		top := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(h) && better(h[top], h[c]) {
				top = c
			}
		}
		if top == i {
			return
		}
		h[i], h[top] = h[top], h[i]
		i = top
	}
}

// draw picks one candidate with probability proportional to its p.
func (s *Sampler) draw(cand []candidate) int32 {
	s.drawn = cand
	total := 0.0
	for _, c := range cand {
		total += c.p
	}
	u := s.rng.Float64() * total
	for _, c := range cand {
		u -= c.p
		if u < 0 {
			return c.id
		}
	}
	// Rounding left u just short of zero: take the last token that had any
	// chance.
	for i := len(cand) - 1; i > 0; i-- {
		if cand[i].p > 0 {
			return cand[i].id
		}
	}
	return cand[0].id
}

// Probs writes into dst (grown to len(logits)) the distribution Sample draws from for this
// row and history: the probability of every vocabulary entry after the repetition penalty,
// top-k, temperature, top-p and min-p, renormalised, zero for the tokens filtered out. At
// temperature 0 it is one-hot at the token Sample picks; with a constraint that allows no
// token, all zero. Speculative decoding compares the target's and the draft's distributions
// with it.
func (s *Sampler) Probs(logits []float32, history []int32, dst []float64) []float64 {
	if cap(dst) < len(logits) {
		dst = make([]float64, len(logits))
	}
	dst = dst[:len(logits)]
	clear(dst)
	if len(logits) == 0 {
		return dst
	}
	var cand []candidate
	switch {
	case s.c != nil:
		if s.p.Temperature == 0 { // constrained draws no random number at temperature 0
			if t := s.constrained(logits, history); t >= 0 {
				dst[t] = 1
			}
			return dst
		}
		w := s.penalize(logits, history)
		if s.c.Mask(w) == 0 {
			return dst // as Sample's -1: nothing may come next
		}
		if cand = s.filter(w); len(cand) == 0 {
			if t := s.firstAllowed(len(w)); t >= 0 {
				dst[t] = 1
			}
			return dst
		}
	case s.p.Temperature == 0:
		dst[argmax(s.penalize(logits, history))] = 1
		return dst
	default:
		cand = s.filtered(logits, history)
	}
	if len(cand) == 0 {
		dst[0] = 1 // as Sample
		return dst
	}
	total := 0.0
	for _, c := range cand {
		total += c.p
	}
	for _, c := range cand {
		dst[c.id] = c.p / total
	}
	return dst
}

// Draw picks an index with probability proportional to weights (non-negative, not all zero;
// they need not sum to 1), with the sampler's generator. It returns -1 when every weight is
// zero.
func (s *Sampler) Draw(weights []float64) int32 {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	if !(total > 0) {
		return -1
	}
	u := s.rng.Float64() * total
	last := int32(-1)
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		last = int32(i)
		u -= w
		if u < 0 {
			return last
		}
	}
	return last // rounding left u just short of zero
}

// Uniform returns a number in [0, 1) from the sampler's generator.
func (s *Sampler) Uniform() float64 { return s.rng.Float64() }
