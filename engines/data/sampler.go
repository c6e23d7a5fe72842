package data

import (
	"fmt"
	"math/rand/v2"
)

// Sampler draws random window offsets from a corpus for training batches. The zero Step starts
// a fresh sequence; the offsets it gives depend only on Seed, the step number, the corpus
// length and Window, so the same seed always gives the same sequence and a sampler rebuilt
// with [SamplerAt] at a saved Step continues exactly where the original left off.
// A Sampler is not safe for concurrent use.
type Sampler struct {
	// Corpus is the corpus the windows come from.
	Corpus *Corpus
	// Seed selects the sequence.
	Seed uint64
	// Window is the number of tokens in each window (for language-model training, usually
	// the context length plus one, for the shifted labels).
	Window int
	// Step is the number of offsets drawn so far: the sampler's entire state. Save it with
	// a checkpoint and pass it to SamplerAt to resume.
	Step uint64
}

// SamplerAt returns a sampler for corpus c whose next draw is draw number step of the
// sequence selected by seed, as if step offsets had already been drawn.
func SamplerAt(c *Corpus, seed uint64, window int, step uint64) *Sampler {
	return &Sampler{Corpus: c, Seed: seed, Window: window, Step: step}
}

// mix64 is the SplitMix64 finalizer, a bijection that scatters nearby inputs (consecutive
// step numbers) across all 64 bits before they seed a PCG.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// OffsetAt returns the window offset of draw number step without changing the sampler. The
// offset is uniform over [0, Len()-Window], so every window lies inside the corpus.
func (s *Sampler) OffsetAt(step uint64) (int64, error) {
	if s.Corpus == nil {
		return 0, fmt.Errorf("data: sampler has no corpus")
	}
	n := s.Corpus.Len()
	if s.Window <= 0 || int64(s.Window) > n {
		return 0, fmt.Errorf("data: sampler window %d: want 1..%d (the corpus length)", s.Window, n)
	}
	r := rand.New(rand.NewPCG(s.Seed, mix64(step^0x9e3779b97f4a7c15)))
	return int64(r.Uint64N(uint64(n - int64(s.Window) + 1))), nil
}

// Next returns the offset of the next window and advances Step.
func (s *Sampler) Next() (int64, error) {
	off, err := s.OffsetAt(s.Step)
	if err != nil {
		return 0, err
	}
	s.Step++
	return off, nil
}

// NextBatch reads the next b windows into one slice of b*Window tokens, window i at
// [i*Window, (i+1)*Window), and advances Step by b. On error Step is left unchanged.
func (s *Sampler) NextBatch(b int) ([]int32, error) {
	if b <= 0 {
		return nil, fmt.Errorf("data: batch size %d: want at least 1", b)
	}
	if _, err := s.OffsetAt(s.Step); err != nil {
		return nil, err
	}
	out := make([]int32, b*s.Window)
	for i := range b {
		off, _ := s.OffsetAt(s.Step + uint64(i))
		if _, err := s.Corpus.ReadAt(out[i*s.Window:(i+1)*s.Window], off); err != nil {
			return nil, err
		}
	}
	s.Step += uint64(b)
	return out, nil
}
