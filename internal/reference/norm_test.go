package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormByHand(t *testing.T) {
	a := FromData([]float64{1, 2, 3, 4}, 4)
	s := math.Sqrt(1.25) // population variance of 1..4 is 1.25
	near(t, []float64{-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, Norm(a, 0).Data, 1e-15)
	e := 0.75
	s = math.Sqrt(1.25 + e)
	near(t, []float64{-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s}, Norm(a, e).Data, 1e-15)
}

func TestNormProperties(t *testing.T) {
	a := Rand(newRNG(50), -3, 5, 16, 3, 2)
	n := Norm(a, 0)
	for r := 0; r < n.NRows(); r++ {
		row := n.Data[r*16 : (r+1)*16]
		mean, sq := 0.0, 0.0
		for _, v := range row {
			mean += v
			sq += v * v
		}
		assert.InDelta(t, 0, mean/16, 1e-14)
		assert.InDelta(t, 1, sq/16, 1e-13)
	}
	// Norm is RMSNorm of the centred rows, which is how the GPT-2 recipe composes it.
	centred := Sub(a, Repeat(Mean(a), a.Ne[:]...))
	nearT(t, RMSNorm(centred, 1e-5), Norm(a, 1e-5), 1e-14)
}

func TestRMSNorm(t *testing.T) {
	a := FromData([]float64{3, 4}, 2)
	r := math.Sqrt(12.5)
	near(t, []float64{3 / r, 4 / r}, RMSNorm(a, 0).Data, 1e-15)
	r = math.Sqrt(12.5 + 0.5)
	near(t, []float64{3 / r, 4 / r}, RMSNorm(a, 0.5).Data, 1e-15)

	b := Rand(newRNG(51), -2, 2, 32, 5)
	y := RMSNorm(b, 0)
	for i := 0; i < 5; i++ {
		row := y.Row(i, 0, 0)
		assert.InDelta(t, 1, math.Sqrt(dot(row, row)/32), 1e-14, "rms of row %d", i)
	}
	assert.Panics(t, func() { RMSNorm(b, -1) })
}

func TestRMSNormBackIsGradient(t *testing.T) {
	rng := newRNG(52)
	x := Rand(rng, -2, 2, 6, 3)
	dz := Rand(rng, -1, 1, 6, 3)
	const eps = 1e-3
	got := RMSNormBack(dz, x, eps)
	f := func(v []float64) float64 { return dot(RMSNorm(FromData(v, 6, 3), eps).Data, dz.Data) }
	num := NumericGrad(f, append([]float64(nil), x.Data...), 1e-5)
	require.Less(t, MaxRelErr(num, got.Data, 1e-6), 1e-7)
}
