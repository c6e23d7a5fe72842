package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func rope1(x []float64, pos int32, nDims, mode int) []float64 {
	a := FromData(append([]float64(nil), x...), len(x), 1, 1)
	return RopeExt(a, []int32{pos}, nDims, mode, 10000, 1, 0, 1, 32, 1, 0).Data
}

func TestRopeNormalAtPos1(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	// theta_0 = 1, theta_1 = 10000^(-2/4) = 0.01; pairs (x0,x1), (x2,x3).
	c0, s0 := math.Cos(1), math.Sin(1)
	c1, s1 := math.Cos(0.01), math.Sin(0.01)
	want := []float64{1*c0 - 2*s0, 1*s0 + 2*c0, 3*c1 - 4*s1, 3*s1 + 4*c1}
	near(t, want, rope1(x, 1, 4, RopeNormal), 1e-15)
}

func TestRopeNeoxAtPos1(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	// NEOX pairs (x0,x2) with theta_0 = 1 and (x1,x3) with theta_1 = 0.01.
	c0, s0 := math.Cos(1), math.Sin(1)
	c1, s1 := math.Cos(0.01), math.Sin(0.01)
	want := []float64{1*c0 - 3*s0, 2*c1 - 4*s1, 1*s0 + 3*c0, 2*s1 + 4*c1}
	near(t, want, rope1(x, 1, 4, RopeNeox), 1e-15)
}

func TestRopePartialDimsAndPos0(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6}
	// nDims = 2: only the first pair rotates, with theta = pos.
	got := rope1(x, 3, 2, RopeNormal)
	c, s := math.Cos(3), math.Sin(3)
	near(t, []float64{c - 2*s, s + 2*c, 3, 4, 5, 6}, got, 1e-15)
	got = rope1(x, 3, 4, RopeNeox)
	// NEOX with nDims 4 of 6: pairs (x0,x2) theta 3, (x1,x3) theta 3*0.01; x4,x5 copied.
	c1, s1 := math.Cos(0.03), math.Sin(0.03)
	near(t, []float64{c - 3*s, 2*c1 - 4*s1, s + 3*c, 2*s1 + 4*c1, 5, 6}, got, 1e-15)
	// Position 0 is the identity.
	near(t, x, rope1(x, 0, 6, RopeNormal), 0)
	near(t, x, rope1(x, 0, 6, RopeNeox), 0)
}

func TestRopeScalingAndShapes(t *testing.T) {
	rng := newRNG(70)
	a := Rand(rng, -1, 1, 8, 3, 4) // headDim 8, 3 heads, 4 tokens
	pos := []int32{0, 5, 2, 9}
	base := RopeExt(a, pos, 8, RopeNormal, 10000, 1, 0, 1, 32, 1, 0)
	// freqScale 0.5 halves every angle, as doubling the positions would.
	half := RopeExt(a, []int32{0, 10, 4, 18}, 8, RopeNormal, 10000, 0.5, 0, 1, 32, 1, 0)
	nearT(t, base, half, 1e-13)
	// attnFactor scales the output.
	twice := RopeExt(a, pos, 8, RopeNormal, 10000, 1, 0, 2, 32, 1, 0)
	nearT(t, Scale(base, 2), twice, 1e-15)
	// Each head of a token rotates alike; each pair keeps its norm.
	for tk := 0; tk < 4; tk++ {
		for h := 0; h < 3; h++ {
			x, y := a.Row(h, tk, 0), base.Row(h, tk, 0)
			for i := 0; i < 4; i++ {
				assert.InDelta(t, math.Hypot(x[2*i], x[2*i+1]), math.Hypot(y[2*i], y[2*i+1]), 1e-15)
			}
			one := rope1(x, pos[tk], 8, RopeNormal)
			near(t, one, y, 1e-15)
		}
	}
	assert.Panics(t, func() { RopeExt(a, pos[:3], 8, RopeNormal, 10000, 1, 0, 1, 32, 1, 0) })
	assert.Panics(t, func() { RopeExt(a, pos, 10, RopeNormal, 10000, 1, 0, 1, 32, 1, 0) })
	assert.Panics(t, func() { RopeExt(a, pos, 3, RopeNormal, 10000, 1, 0, 1, 32, 1, 0) })
	assert.Panics(t, func() { RopeExt(a, pos, 8, 8, 10000, 1, 0, 1, 32, 1, 0) }, "mrope unsupported")
}

func TestRopeFreqFactors(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	p := RopeParams{NDims: 4, Mode: RopeNormal, FreqBase: 10000, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1,
		FreqFactors: []float64{2, 0.5}}
	got := p.Apply(FromData(append([]float64(nil), x...), 4), []int32{1})
	c0, s0 := math.Cos(0.5), math.Sin(0.5)
	c1, s1 := math.Cos(0.02), math.Sin(0.02)
	near(t, []float64{c0 - 2*s0, s0 + 2*c0, 3*c1 - 4*s1, 3*s1 + 4*c1}, got.Data, 1e-15)
}

func TestRopeBack(t *testing.T) {
	rng := newRNG(71)
	a := Rand(rng, -1, 1, 6, 2, 3)
	pos := []int32{4, 1, 7}
	for _, mode := range []int{RopeNormal, RopeNeox} {
		// Inverse when mscale == 1.
		y := RopeExt(a, pos, 4, mode, 500, 1, 0, 1, 32, 1, 0)
		nearT(t, a, RopeExtBack(y, pos, 4, mode, 500, 1, 0, 1, 32, 1, 0), 1e-15)
		// Adjoint in general (YaRN on, attnFactor != 1).
		g := Rand(rng, -1, 1, 6, 2, 3)
		fwd := RopeExt(a, pos, 6, mode, 500, 0.25, 1, 1.3, 32, 1, 64)
		bwd := RopeExtBack(g, pos, 6, mode, 500, 0.25, 1, 1.3, 32, 1, 64)
		assert.InDelta(t, dot(fwd.Data, g.Data), dot(a.Data, bwd.Data), 1e-13)
	}
}

func TestRopeYarnCorrDims(t *testing.T) {
	corr := func(nDims, nCtx int, base, beta float64) float64 {
		return float64(nDims) * math.Log(float64(nCtx)/(beta*2*math.Pi)) / (2 * math.Log(base))
	}
	d := RopeYarnCorrDims(128, 4096, 10000, 32, 1)
	assert.Equal(t, math.Floor(corr(128, 4096, 10000, 32)), d[0])
	assert.Equal(t, math.Ceil(corr(128, 4096, 10000, 1)), d[1])
	assert.Equal(t, [2]float64{20, 46}, d)
	// Clamped to [0, nDims-1].
	assert.Equal(t, [2]float64{0, 7}, RopeYarnCorrDims(8, 16, 10, 32, 1e-6))
}

func TestRopeYarnByHand(t *testing.T) {
	// nDims 8, nCtxOrig 4096, base 10000: corr dims [1, 3], so with extFactor 1
	// pairs 0 and 1 extrapolate (ramp 1), pair 2 mixes half-half, pair 3 interpolates.
	require := assert.New(t)
	require.Equal([2]float64{1, 3}, RopeYarnCorrDims(8, 4096, 10000, 32, 1))
	const fs, pos = 0.25, 7.0
	x := []float64{1, 0, 1, 0, 1, 0, 1, 0}
	got := RopeExt(FromData(x, 8), []int32{int32(pos)}, 8, RopeNormal, 10000, fs, 1, 1, 32, 1, 4096)
	mscale := 1 + 0.1*math.Log(1/fs)
	for i, mix := range []float64{1, 1, 0.5, 0} {
		extrap := pos * math.Pow(10000, -2*float64(i)/8)
		theta := fs*extrap*(1-mix) + extrap*mix
		assert.InDelta(t, mscale*math.Cos(theta), got.Data[2*i], 1e-15, "pair %d", i)
		assert.InDelta(t, mscale*math.Sin(theta), got.Data[2*i+1], 1e-15, "pair %d", i)
	}
	// extFactor 0: pure interpolation, no magnitude correction.
	plain := RopeExt(FromData(x, 8), []int32{7}, 8, RopeNormal, 10000, fs, 0, 1, 32, 1, 4096)
	assert.InDelta(t, math.Cos(fs*pos), plain.Data[0], 1e-15)
}
