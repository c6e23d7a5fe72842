package reference

import (
	"math"
	mrand "math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewAndIndexing(t *testing.T) {
	a := New(2, 3)
	assert.Equal(t, [4]int{2, 3, 1, 1}, a.Ne)
	assert.Equal(t, 6, a.Len())
	assert.Equal(t, 3, a.NRows())
	a.Set(5, 1, 2)
	assert.Equal(t, 5.0, a.Data[1+2*2])
	assert.Equal(t, 5.0, a.At(1, 2))
	assert.Equal(t, 5.0, a.At(1, 2, 0, 0))

	b := New(2, 3, 4, 5)
	b.Set(7, 1, 2, 3, 4)
	assert.Equal(t, 7.0, b.Data[1+2*(2+3*(3+4*4))])
	assert.Equal(t, []float64{0, 0}, b.Row(0, 0, 0))

	s := New()
	assert.Equal(t, [4]int{1, 1, 1, 1}, s.Ne)
	assert.Equal(t, 1, s.Len())

	assert.Panics(t, func() { a.At(2, 0) })
	assert.Panics(t, func() { a.At(0, 3) })
	assert.Panics(t, func() { a.At(0, 0, 1) })
	assert.Panics(t, func() { New(1, 2, 3, 4, 5) })
	assert.Panics(t, func() { FromData([]float64{1, 2}, 3) })
}

func TestCloneReshapeMap(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4, 5, 6}, 3, 2)
	c := a.Clone()
	c.Data[0] = 100
	assert.Equal(t, 1.0, a.Data[0], "Clone must copy the data")

	r := a.Reshape(2, 3)
	assert.Equal(t, [4]int{2, 3, 1, 1}, r.Ne)
	assert.Equal(t, 4.0, r.At(1, 1))
	assert.Panics(t, func() { a.Reshape(4, 2) })

	m := a.Map(func(x float64) float64 { return -x })
	assert.Equal(t, []float64{-1, -2, -3, -4, -5, -6}, m.Data)
	assert.Equal(t, a.Ne, m.Ne)
}

func TestRand(t *testing.T) {
	a := Rand(newRNG(1), -2, 3, 4, 5, 6)
	assert.Equal(t, [4]int{4, 5, 6, 1}, a.Ne)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range a.Data {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	assert.GreaterOrEqual(t, lo, -2.0)
	assert.Less(t, hi, 3.0)
	assert.Less(t, lo, -1.5, "120 uniform draws should reach near the bottom")
	assert.Greater(t, hi, 2.5, "120 uniform draws should reach near the top")

	b := Rand(newRNG(1), -2, 3, 4, 5, 6)
	assert.Equal(t, a.Data, b.Data, "same seed, same data")
	c := Rand(newRNG(2), -2, 3, 4, 5, 6)
	assert.NotEqual(t, a.Data, c.Data)

	// math/rand (v1) works too.
	d := Rand(mrand.New(mrand.NewSource(3)), 0, 1, 10)
	assert.Equal(t, 10, d.Len())
}

func TestF32RoundTrip(t *testing.T) {
	f := []float32{1.5, -2.25, 3.1, 0}
	a := FromF32(f, 2, 2)
	assert.Equal(t, [4]int{2, 2, 1, 1}, a.Ne)
	assert.Equal(t, float64(float32(3.1)), a.At(0, 1))
	assert.Equal(t, f, a.ToF32())

	b := FromData([]float64{0.1, 1 + 1e-12}, 2)
	got := b.ToF32()
	require.Len(t, got, 2)
	assert.Equal(t, float32(0.1), got[0])
	assert.Equal(t, float32(1), got[1])
	assert.Panics(t, func() { FromF32(f, 3) })
}
