package train

import (
	"fmt"
	"math"
)

// Unigram is a unigram language model with add-one (Laplace) smoothing:
// P(id) = (count(id)+1) / (len(train)+vocab). Its held-out cross entropy is the baseline a
// trained model must beat, since it ignores all context.
type Unigram struct {
	counts []int
	total  int
}

// NewUnigram fits a Unigram on train over a vocabulary of vocab ids; every id of train
// must lie in [0, vocab). An empty train gives the uniform distribution.
func NewUnigram(train []int32, vocab int) (*Unigram, error) {
	if vocab < 1 {
		return nil, fmt.Errorf("train: vocabulary size %d must be at least 1", vocab)
	}
	u := &Unigram{counts: make([]int, vocab), total: len(train)}
	for i, id := range train {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("train: unigram training id %d at position %d is outside [0, %d)", id, i, vocab)
		}
		u.counts[id]++
	}
	return u, nil
}

// Prob returns the smoothed probability of id, or 0 if id is outside the vocabulary.
func (u *Unigram) Prob(id int32) float64 {
	if id < 0 || int(id) >= len(u.counts) {
		return 0
	}
	return float64(u.counts[id]+1) / float64(u.total+len(u.counts))
}

// CrossEntropy returns the mean negative log-probability of heldOut in nats per token. It
// needs at least one id, each in the vocabulary.
func (u *Unigram) CrossEntropy(heldOut []int32) (float64, error) {
	if len(heldOut) == 0 {
		return 0, fmt.Errorf("train: unigram cross entropy needs at least one held-out id")
	}
	sum := 0.0
	for i, id := range heldOut {
		p := u.Prob(id)
		if p == 0 {
			return 0, fmt.Errorf("train: held-out id %d at position %d is outside [0, %d)", id, i, len(u.counts))
		}
		sum -= math.Log(p)
	}
	return sum / float64(len(heldOut)), nil
}
