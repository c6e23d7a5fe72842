package data

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openSeq(t *testing.T, n, vocab int) (*Corpus, []int32) {
	t.Helper()
	ids := seq(n, vocab)
	c, err := Open(writeCorpus(t, 2, vocab, ids, 4096))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, ids
}

func draw(t *testing.T, s *Sampler, n int) []int64 {
	t.Helper()
	out := make([]int64, n)
	for i := range out {
		off, err := s.Next()
		require.NoError(t, err)
		out[i] = off
	}
	return out
}

func TestSamplerDeterministicAndResumable(t *testing.T) {
	c, _ := openSeq(t, 10_000, 1000)
	a := draw(t, &Sampler{Corpus: c, Seed: 42, Window: 65}, 500)
	b := draw(t, &Sampler{Corpus: c, Seed: 42, Window: 65}, 500)
	assert.Equal(t, a, b, "same seed, same sequence")

	other := draw(t, &Sampler{Corpus: c, Seed: 43, Window: 65}, 500)
	assert.NotEqual(t, a, other, "another seed, another sequence")

	s := &Sampler{Corpus: c, Seed: 42, Window: 65}
	draw(t, s, 200)
	assert.EqualValues(t, 200, s.Step)
	resumed := SamplerAt(c, 42, 65, s.Step)
	assert.Equal(t, a[200:], draw(t, resumed, 300), "SamplerAt resumes without replaying")

	off, err := s.OffsetAt(7)
	require.NoError(t, err)
	assert.Equal(t, a[7], off)
	assert.EqualValues(t, 200, s.Step, "OffsetAt leaves Step alone")

	// Offsets stay in range and spread over it (no gross bias, not a constant).
	distinct := map[int64]bool{}
	var lo, hi int
	for _, o := range a {
		require.GreaterOrEqual(t, o, int64(0))
		require.LessOrEqual(t, o, int64(10_000-65))
		distinct[o] = true
		if o < (10_000-65)/2 {
			lo++
		} else {
			hi++
		}
	}
	assert.Greater(t, len(distinct), 450)
	assert.InDelta(t, 250, lo, 60)
	assert.InDelta(t, 250, hi, 60)
}

func TestSamplerEdgeCases(t *testing.T) {
	c, ids := openSeq(t, 64, 1000)
	// A window the size of the corpus has only offset 0.
	s := &Sampler{Corpus: c, Seed: 1, Window: 64}
	for _, o := range draw(t, s, 20) {
		assert.Zero(t, o)
	}
	for _, w := range []int{0, -1, 65} {
		_, err := (&Sampler{Corpus: c, Seed: 1, Window: w}).Next()
		assert.Error(t, err, "window %d", w)
	}
	_, err := (&Sampler{Seed: 1, Window: 1}).Next()
	assert.Error(t, err)

	s = &Sampler{Corpus: c, Seed: 9, Window: 8}
	batch, err := s.NextBatch(5)
	require.NoError(t, err)
	require.Len(t, batch, 40)
	assert.EqualValues(t, 5, s.Step)
	for i := range 5 {
		off, err := s.OffsetAt(uint64(i))
		require.NoError(t, err)
		assert.Equal(t, ids[off:off+8], batch[i*8:(i+1)*8])
	}
	_, err = s.NextBatch(0)
	assert.Error(t, err)
	assert.EqualValues(t, 5, s.Step)
}
